/* The brick's lease table (lease_table.c): the tree of paths finds exactly
 * a path and what lies beneath it, placeholders come and go with what is
 * under them, nothing is freed before the reap, and the timed list keeps
 * what it watches. */
#include <stdlib.h>

#include "../../src/brick/lease_table.h"
#include "check.h"

static struct lease *add(struct brick_ltab *T, const char *p)
{
    return brick_ltab_find_or_add(T, p, strlen(p));
}

static struct lease *find(struct brick_ltab *T, const char *p)
{
    return brick_ltab_find(T, p, strlen(p));
}

/* A node that holds a lease: n > 0 keeps it from the reap. */
static struct lease *held(struct brick_ltab *T, const char *p)
{
    struct lease *l = add(T, p);
    if (l)
        l->n = 1;
    return l;
}

static void release(struct brick_ltab *T, struct lease *l)
{
    l->n = 0;
    brick_ltab_put(T, l);
}

/* How many nodes a walk from p visits, and whether one is named want. */
static int walk(struct brick_ltab *T, const char *p, const char *want, int *seen)
{
    struct lease *top = find(T, p);
    int n = 0;
    *seen = 0;
    for (struct lease *l = top; l; l = brick_ltab_walk_next(top, l)) {
        n++;
        if (want && strcmp(l->path, want) == 0)
            *seen = 1;
    }
    return n;
}

static void test_parent_len(void)
{
    CHECK_EQ(brick_ltab_parent_len("/", 1), 1);
    CHECK_EQ(brick_ltab_parent_len("/a", 2), 1);
    CHECK_EQ(brick_ltab_parent_len("/a/b", 4), 2);
    CHECK_EQ(brick_ltab_parent_len("/a/bc/d", 7), 5);
    CHECK_EQ(brick_ltab_parent_len("/a/", 3), 2); /* always shorter */
}

static void test_ancestors_are_added(void)
{
    struct brick_ltab T;
    CHECK_EQ(brick_ltab_init(&T, 1000), 0);
    struct lease *l = held(&T, "/a/b/c/file");
    CHECK(l != NULL);
    CHECK_EQ(T.count, 5); /* "/", "/a", "/a/b", "/a/b/c" and the file */
    CHECK(find(&T, "/a/b") != NULL);
    CHECK(l->up == find(&T, "/a/b/c"));
    CHECK(find(&T, "/")->up == NULL);
    CHECK(find(&T, "/a")->up == find(&T, "/"));
    /* a sibling reuses them */
    held(&T, "/a/b/c/other");
    CHECK_EQ(T.count, 6);
    brick_ltab_fini(&T);
}

static void test_walk_sees_only_the_subtree(void)
{
    struct brick_ltab T;
    CHECK_EQ(brick_ltab_init(&T, 1000), 0);
    held(&T, "/d/x");
    held(&T, "/d/sub/y");
    held(&T, "/d/sub/deeper/z");
    held(&T, "/dd/x"); /* a longer name with the same prefix */
    held(&T, "/e");
    int seen;
    /* /d, /d/x, /d/sub, /d/sub/y, /d/sub/deeper, /d/sub/deeper/z */
    CHECK_EQ(walk(&T, "/d", "/d/sub/deeper/z", &seen), 6);
    CHECK(seen);
    CHECK_EQ(walk(&T, "/d", "/dd/x", &seen), 6);
    CHECK(!seen);
    CHECK_EQ(walk(&T, "/d/sub", "/d/x", &seen), 4);
    CHECK(!seen);
    CHECK_EQ(walk(&T, "/e", NULL, &seen), 1);
    CHECK_EQ(walk(&T, "/", NULL, &seen), (int)T.count);
    CHECK_EQ(walk(&T, "/nothing", NULL, &seen), 0);
    /* the direct children of /d */
    int kids = 0;
    for (struct lease *l = find(&T, "/d")->kid; l; l = l->sib_next)
        kids++;
    CHECK_EQ(kids, 2);
    brick_ltab_fini(&T);
}

static void test_placeholders_go_with_their_last_child(void)
{
    struct brick_ltab T;
    CHECK_EQ(brick_ltab_init(&T, 1000), 0);
    struct lease *a = held(&T, "/p/q/a");
    struct lease *b = held(&T, "/p/q/b");
    struct lease *p = held(&T, "/p"); /* a lease of its own */
    CHECK_EQ(T.count, 5);
    release(&T, a);
    CHECK_EQ(T.count, 5); /* nothing is freed before the reap */
    brick_ltab_reap(&T, 0);
    CHECK_EQ(T.count, 4);
    CHECK(find(&T, "/p/q/a") == NULL);
    release(&T, b);
    brick_ltab_reap(&T, 0);
    /* /p/q went with its last child; /p holds a lease, "/" has /p */
    CHECK(find(&T, "/p/q") == NULL);
    CHECK_EQ(T.count, 2);
    CHECK(p->kid == NULL);
    release(&T, p);
    brick_ltab_reap(&T, 0);
    CHECK_EQ(T.count, 0);
    brick_ltab_fini(&T);
}

static void test_cooling_and_timed_nodes_stay(void)
{
    struct brick_ltab T;
    CHECK_EQ(brick_ltab_init(&T, 1000), 0);
    struct lease *l = held(&T, "/c/f");
    l->cooldown_until_ms = 100;
    CHECK_EQ(brick_ltab_watch(&T, l), 1);
    CHECK_EQ(brick_ltab_watch(&T, l), 0); /* once on the list */
    release(&T, l);
    brick_ltab_reap(&T, 50);
    CHECK(find(&T, "/c/f") == l); /* cooling, and on the timed list */
    brick_ltab_unwatch(&T, l);
    CHECK(T.timed == NULL);
    brick_ltab_reap(&T, 50);
    CHECK(find(&T, "/c/f") == l); /* still cooling */
    brick_ltab_put(&T, l);
    brick_ltab_reap(&T, 100);
    CHECK(find(&T, "/c/f") == NULL);
    CHECK_EQ(T.count, 0);
    brick_ltab_fini(&T);
}

static void test_regranted_before_the_reap_stays(void)
{
    struct brick_ltab T;
    CHECK_EQ(brick_ltab_init(&T, 1000), 0);
    struct lease *l = held(&T, "/r/f");
    release(&T, l);
    CHECK(held(&T, "/r/f") == l);
    brick_ltab_reap(&T, 0);
    CHECK(find(&T, "/r/f") == l);
    CHECK(!l->reaping);
    brick_ltab_fini(&T);
}

static void test_bound_and_growth(void)
{
    struct brick_ltab T;
    CHECK_EQ(brick_ltab_init(&T, 3000), 0);
    char p[64];
    int ok = 1;
    for (int i = 0; i < 2990 && ok; i++) {
        snprintf(p, sizeof(p), "/g/%d", i);
        ok = held(&T, p) != NULL;
    }
    CHECK(ok);
    CHECK(T.nb >= T.count); /* the hash grew */
    CHECK(find(&T, "/g/1234") != NULL);
    /* a path needing two new nodes past the bound: none stays */
    for (int i = 2990; i < 2998; i++) {
        snprintf(p, sizeof(p), "/g/%d", i);
        held(&T, p);
    }
    CHECK_EQ(T.count, 3000);
    CHECK(add(&T, "/h/new") == NULL);
    brick_ltab_reap(&T, 0);
    CHECK(find(&T, "/h") == NULL);
    CHECK_EQ(T.count, 3000);
    brick_ltab_fini(&T);
    /* the chain added before the bound was met is reaped */
    CHECK_EQ(brick_ltab_init(&T, 3), 0);
    CHECK(add(&T, "/x/y/z") == NULL);
    CHECK_EQ(T.count, 3);
    brick_ltab_reap(&T, 0);
    CHECK_EQ(T.count, 0);
    brick_ltab_fini(&T);
}

int main(void)
{
    test_parent_len();
    test_ancestors_are_added();
    test_walk_sees_only_the_subtree();
    test_placeholders_go_with_their_last_child();
    test_cooling_and_timed_nodes_stay();
    test_regranted_before_the_reap_stays();
    test_bound_and_growth();
    return check_summary("test_brick_lease_table");
}
