/* A small streaming XML writer for `--xml` output (docs/cli.md): the
 * documents GlusterFS's `gluster --xml` prints, laid out the way its
 * output is (two spaces per level, one element per line, a leaf's text on
 * its line, <empty/> for an empty leaf), so scripts written for it parse
 * ours. Text and attribute values are escaped (& < > " '); bytes that are
 * not valid UTF-8, and control characters XML 1.0 cannot carry, become
 * U+FFFD, so a file name never makes the document ill-formed.
 *
 * The writer only keeps pointers to element names: pass names that live
 * until the element is closed (string literals). Errors of the stream are
 * the caller's to check (ferror). */
#ifndef CAIRN_LIB_XML_H
#define CAIRN_LIB_XML_H

#include <stdio.h>

#define XML_DEPTH_MAX 16

/* glusterd's error numbers (glusterd-errno.h) in <opErrno>, which scripts
 * written for GlusterFS compare against: never renumber. */
#define XML_ERRNO_INTERNAL 30800    /* any other failure */
#define XML_ERRNO_NO_VOLUME 30806   /* volume does not exist */
#define XML_ERRNO_NOT_STARTED 30810 /* volume is not started */

struct xml_writer {
    FILE *out;
    int depth;   /* open elements */
    int mixed;   /* > 0: depth of the element whose content stays on one line */
    int pending; /* the innermost start tag still lacks its '>' */
    const char *open[XML_DEPTH_MAX];
};

/* Starts a document on out: the XML declaration, then <cliOutput>. */
void xml_begin(struct xml_writer *w, FILE *out);
/* Closes every open element (</cliOutput> last). */
void xml_end(struct xml_writer *w);

/* <opRet>, <opErrno>, <opErrstr>: ret 0 or -1, errstr NULL for none. */
void xml_op_status(struct xml_writer *w, int ret, int op_errno, const char *errstr);
/* A whole error document: <cliOutput> with opRet -1, op_errno, errstr. */
void xml_error_doc(FILE *out, int op_errno, const char *errstr);
/* A whole document for a command without an XML form of its own: opRet 0
 * and its text output in <output> (GlusterFS's generic form). */
void xml_output_doc(FILE *out, const char *text);

/* Opens <name> (with attribute attr="aval" unless attr is NULL) on a line of
 * its own; its children go on the following lines, one level deeper. Closed
 * without children, it is written <name/>. */
void xml_open(struct xml_writer *w, const char *name, const char *attr, const char *aval);
/* Opens <name attr="aval">text: an element of mixed content, as GlusterFS's
 * volume info writes a brick. Its children stay on the same line (a parser
 * then reads text as the element's text, without white space added). */
void xml_open_mixed(struct xml_writer *w, const char *name, const char *attr, const char *aval,
                    const char *text);
/* Closes the innermost open element. */
void xml_close(struct xml_writer *w);

/* A leaf: <name>text</name>, or <name/> when text is NULL or empty. */
void xml_leaf(struct xml_writer *w, const char *name, const char *text);
/* A leaf with an attribute: <name attr="aval">text</name>. */
void xml_leaf_attr(struct xml_writer *w, const char *name, const char *attr, const char *aval,
                   const char *text);
/* A leaf holding a number, or a printf-formatted text. */
void xml_leaf_int(struct xml_writer *w, const char *name, long long v);
void xml_leaf_fmt(struct xml_writer *w, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes s escaped for text or an attribute value (see above). */
void xml_escape(FILE *out, const char *s);

#endif
