/* The --xml writer: layout, escaping, mixed content, bytes XML cannot carry. */
#include <stdlib.h>
#include <string.h>

#include "../../src/lib/xml.h"
#include "check.h"

static void test_layout(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct xml_writer w;
    xml_begin(&w, f);
    xml_op_status(&w, 0, 0, NULL);
    xml_open(&w, "volumes", NULL, NULL);
    xml_open(&w, "volume", NULL, NULL);
    xml_leaf(&w, "name", "v<&>\"'");
    xml_open(&w, "bricks", NULL, NULL);
    xml_open_mixed(&w, "brick", "uuid", "u\"1", "h:/b&");
    xml_leaf(&w, "name", "h:/b&");
    xml_leaf_int(&w, "isArbiter", 1);
    xml_open(&w, "empty", NULL, NULL);
    xml_close(&w);
    xml_close(&w);
    xml_close(&w);
    xml_open(&w, "options", NULL, NULL);
    xml_close(&w);
    xml_leaf_fmt(&w, "count", "%d", 7);
    xml_end(&w);
    fclose(f);
    CHECK_STR(buf, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n"
                   "<cliOutput>\n"
                   "  <opRet>0</opRet>\n"
                   "  <opErrno>0</opErrno>\n"
                   "  <opErrstr/>\n"
                   "  <volumes>\n"
                   "    <volume>\n"
                   "      <name>v&lt;&amp;&gt;&quot;&apos;</name>\n"
                   "      <bricks>\n"
                   "        <brick uuid=\"u&quot;1\">h:/b&amp;<name>h:/b&amp;</name>"
                   "<isArbiter>1</isArbiter><empty/></brick>\n"
                   "      </bricks>\n"
                   "      <options/>\n"
                   "      <count>7</count>\n"
                   "    </volume>\n"
                   "  </volumes>\n"
                   "</cliOutput>\n");
    free(buf);
}

static void test_bytes(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    /* valid: é, €, 𝄞, tab; invalid: a lone continuation byte, a truncated
     * sequence, an overlong '/', a surrogate, U+FFFF, ESC */
    xml_escape(f, "\xC3\xA9\xE2\x82\xAC\xF0\x9D\x84\x9E\t|\x80|\xE2\x82|\xC0\xAF|\xED\xA0\x80|"
                  "\xEF\xBF\xBF|\x1B");
    fclose(f);
    CHECK_STR(buf, "\xC3\xA9\xE2\x82\xAC\xF0\x9D\x84\x9E\t|\xEF\xBF\xBD|\xEF\xBF\xBD\xEF\xBF\xBD|"
                   "\xEF\xBF\xBD\xEF\xBF\xBD|\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD|"
                   "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD|\xEF\xBF\xBD");
    free(buf);
}

static void test_error_doc(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    xml_error_doc(f, XML_ERRNO_NO_VOLUME, "Volume a&b does not exist");
    fclose(f);
    CHECK_STR(buf, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n"
                   "<cliOutput>\n"
                   "  <opRet>-1</opRet>\n"
                   "  <opErrno>30806</opErrno>\n"
                   "  <opErrstr>Volume a&amp;b does not exist</opErrstr>\n"
                   "</cliOutput>\n");
    free(buf);
}

int main(void)
{
    test_layout();
    test_bytes();
    test_error_doc();
    return check_summary("test_xml");
}
