/* The XML writer of `--xml` output (xml.h). */
#include "xml.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD */

static void line_end(struct xml_writer *w)
{
    if (!w->mixed)
        fputc('\n', w->out);
}

/* Length of the valid UTF-8 sequence at s that is also an XML 1.0
 * character, or 0. */
static size_t utf8_char(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80)
        return c >= 0x20 || c == '\t' || c == '\n' || c == '\r' ? 1 : 0;
    size_t n = c >= 0xC2 && c <= 0xDF   ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
    if (!n)
        return 0;
    unsigned cp = c & (0x7F >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0; /* overlong or out of range */
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF)
        return 0; /* surrogates and non-characters are not XML characters */
    return n;
}

void xml_escape(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        switch (*p) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        case '\'':
            fputs("&apos;", out);
            break;
        default: {
            size_t n = utf8_char(p);
            if (!n) {
                fputs(REPLACEMENT, out);
                p++;
                continue;
            }
            fwrite(p, 1, n, out);
            p += n;
            continue;
        }
        }
        p++;
    }
}

/* Finishes the start tag of the innermost element, now that it has a
 * child; starts a line at the current depth, unless inside mixed content. */
static void line_start(struct xml_writer *w)
{
    if (w->pending) {
        w->pending = 0;
        fputc('>', w->out);
        line_end(w);
    }
    if (!w->mixed)
        fprintf(w->out, "%*s", 2 * w->depth, "");
}

static void start_tag(struct xml_writer *w, const char *name, const char *attr, const char *aval)
{
    line_start(w);
    fprintf(w->out, "<%s", name);
    if (attr) {
        fprintf(w->out, " %s=\"", attr);
        xml_escape(w->out, aval ? aval : "");
        fputc('"', w->out);
    }
}

static void push(struct xml_writer *w, const char *name)
{
    if (w->depth < XML_DEPTH_MAX)
        w->open[w->depth] = name;
    w->depth++;
}

void xml_begin(struct xml_writer *w, FILE *out)
{
    memset(w, 0, sizeof(*w));
    w->out = out;
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n", out);
    xml_open(w, "cliOutput", NULL, NULL);
}

void xml_end(struct xml_writer *w)
{
    while (w->depth > 0)
        xml_close(w);
    fflush(w->out);
}

void xml_open(struct xml_writer *w, const char *name, const char *attr, const char *aval)
{
    start_tag(w, name, attr, aval);
    w->pending = 1; /* '>' or '/>' once we know whether it has children */
    push(w, name);
}

void xml_open_mixed(struct xml_writer *w, const char *name, const char *attr, const char *aval,
                    const char *text)
{
    start_tag(w, name, attr, aval);
    fputc('>', w->out);
    xml_escape(w->out, text ? text : "");
    push(w, name);
    if (!w->mixed)
        w->mixed = w->depth;
}

void xml_close(struct xml_writer *w)
{
    if (w->depth == 0)
        return;
    w->depth--;
    const char *name = w->depth < XML_DEPTH_MAX ? w->open[w->depth] : "?";
    if (w->pending) { /* no children: <name/> */
        w->pending = 0;
        fputs("/>", w->out);
        line_end(w);
        return;
    }
    if (w->mixed && w->mixed > w->depth) {
        fprintf(w->out, "</%s>", name);
        if (w->mixed == w->depth + 1) {
            w->mixed = 0;
            fputc('\n', w->out);
        }
        return;
    }
    line_start(w);
    fprintf(w->out, "</%s>", name);
    line_end(w);
}

void xml_leaf_attr(struct xml_writer *w, const char *name, const char *attr, const char *aval,
                   const char *text)
{
    start_tag(w, name, attr, aval);
    if (!text || !*text) {
        fputs("/>", w->out);
    } else {
        fputc('>', w->out);
        xml_escape(w->out, text);
        fprintf(w->out, "</%s>", name);
    }
    line_end(w);
}

void xml_leaf(struct xml_writer *w, const char *name, const char *text)
{
    xml_leaf_attr(w, name, NULL, NULL, text);
}

void xml_leaf_int(struct xml_writer *w, const char *name, long long v)
{
    char s[32];
    snprintf(s, sizeof(s), "%lld", v);
    xml_leaf(w, name, s);
}

void xml_leaf_fmt(struct xml_writer *w, const char *name, const char *fmt, ...)
{
    char small[256], *s = small;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof(small) && (s = malloc((size_t)n + 1))) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    xml_leaf(w, name, s ? s : small);
    if (s != small)
        free(s);
}

void xml_op_status(struct xml_writer *w, int ret, int op_errno, const char *errstr)
{
    xml_leaf_int(w, "opRet", ret);
    xml_leaf_int(w, "opErrno", op_errno);
    xml_leaf(w, "opErrstr", errstr);
}

void xml_error_doc(FILE *out, int op_errno, const char *errstr)
{
    struct xml_writer w;
    xml_begin(&w, out);
    xml_op_status(&w, -1, op_errno, errstr);
    xml_end(&w);
}

void xml_output_doc(FILE *out, const char *text)
{
    struct xml_writer w;
    xml_begin(&w, out);
    xml_op_status(&w, 0, 0, NULL);
    xml_leaf(&w, "output", text);
    xml_end(&w);
}
