/*
 * test_tree.c - exhaustive check of the double binary tree construction (algo/tree.c) for
 * every rank count 1..1024 and a few larger ones up to the maximum: each tree has one root
 * that every rank agrees on, symmetric parent/child links, reaches all ranks exactly once,
 * and its depth (walked through parents) is rcoll_dbtree_depth() <= ceil(log2 n); across
 * the two trees no rank is interior in both, the roots differ and at most n % 2 ranks are
 * leaves in both.  Out-of-range arguments give all -1.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algo/tree.h"
#include "check.h"

typedef struct {
    rcoll_tree_node_t *node; /* per rank */
    int root;
    int *queue;              /* BFS scratch */
    char *seen;
} tree_t;

static int ceil_log2(int n)
{
    int d = 0;
    while ((1 << d) < n) d++;
    return d;
}

static int in_range(int x, int n) { return x >= 0 && x < n; }
static int is_interior(const rcoll_tree_node_t *nd) { return nd->child[0] >= 0 || nd->child[1] >= 0; }

/* Builds tree t over n ranks into tr and checks it on its own. */
static void check_tree(int n, int t, tree_t *tr)
{
    int bad_root = -1, bad_range = -1, bad_order = -1, bad_up = -1, bad_down = -1;
    int nroots = 0, visited = 0, dup = 0, maxdepth = 0, cycle = -1;

    tr->root = -2;
    for (int r = 0; r < n; r++) {
        int root;
        rcoll_dbtree_node(n, r, t, &tr->node[r], &root);
        if (tr->root == -2) tr->root = root;
        if (root != tr->root && bad_root < 0) bad_root = r;
    }
    CHECK(bad_root < 0 && in_range(tr->root, n), "n=%d t=%d: root %d, rank %d disagrees", n, t,
          tr->root, bad_root);
    if (!in_range(tr->root, n)) return;

    for (int r = 0; r < n; r++) {
        const rcoll_tree_node_t *nd = &tr->node[r];
        int p = nd->parent, c0 = nd->child[0], c1 = nd->child[1];
        if (p == -1) nroots++;
        if ((p != -1 && (!in_range(p, n) || p == r)) || (c0 != -1 && (!in_range(c0, n) || c0 == r)) ||
            (c1 != -1 && (!in_range(c1, n) || c1 == r))) {
            if (bad_range < 0) bad_range = r;
            continue;
        }
        if ((c0 == -1 && c1 != -1) || (c0 != -1 && c0 == c1)) {
            if (bad_order < 0) bad_order = r;
        }
        if (p != -1 && tr->node[p].child[0] != r && tr->node[p].child[1] != r && bad_up < 0)
            bad_up = r;
        for (int i = 0; i < 2; i++) {
            int c = nd->child[i];
            if (c != -1 && tr->node[c].parent != r && bad_down < 0) bad_down = r;
        }
    }
    CHECK(bad_range < 0, "n=%d t=%d: rank %d has a link out of range or to itself", n, t, bad_range);
    if (bad_range >= 0) return;
    CHECK(bad_order < 0, "n=%d t=%d: rank %d: child[1] without child[0], or equal children", n, t,
          bad_order);
    CHECK(nroots == 1 && tr->node[tr->root].parent == -1,
          "n=%d t=%d: %d ranks without parent, root %d has parent %d", n, t, nroots, tr->root,
          tr->node[tr->root].parent);
    CHECK(bad_up < 0, "n=%d t=%d: parent of rank %d does not list it as a child", n, t, bad_up);
    CHECK(bad_down < 0, "n=%d t=%d: a child of rank %d does not have it as parent", n, t, bad_down);

    /* Reachability from the root: every rank exactly once. */
    for (int r = 0; r < n; r++) tr->seen[r] = 0;
    int head = 0, tail = 0;
    tr->queue[tail++] = tr->root;
    tr->seen[tr->root] = 1;
    while (head < tail) {
        const rcoll_tree_node_t *nd = &tr->node[tr->queue[head++]];
        for (int i = 0; i < 2; i++) {
            int c = nd->child[i];
            if (c < 0) continue;
            if (tr->seen[c]) {
                dup++;
                continue;
            }
            tr->seen[c] = 1;
            tr->queue[tail++] = c;
        }
    }
    visited = tail;
    CHECK(visited == n && dup == 0, "n=%d t=%d: %d of %d ranks reachable, %d reached twice", n, t,
          visited, n, dup);

    /* Depth through parents (bounded walk: a cycle shows as a walk longer than n). */
    for (int r = 0; r < n && cycle < 0; r++) {
        int d = 0;
        for (int x = r; tr->node[x].parent != -1; x = tr->node[x].parent) {
            if (++d > n) {
                cycle = r;
                break;
            }
        }
        if (d > maxdepth) maxdepth = d;
    }
    CHECK(cycle < 0, "n=%d t=%d: parent walk from rank %d does not end", n, t, cycle);
    CHECK(maxdepth <= ceil_log2(n) && maxdepth == rcoll_dbtree_depth(n),
          "n=%d t=%d: depth %d, rcoll_dbtree_depth %d, ceil(log2 n) %d", n, t, maxdepth,
          rcoll_dbtree_depth(n), ceil_log2(n));
}

static void check_dbtree(int n, tree_t tr[2])
{
    int both_interior = -1, both_leaf = 0;

    check_tree(n, 0, &tr[0]);
    check_tree(n, 1, &tr[1]);
    if (n < 2) {
        CHECK(tr[0].root == 0 && tr[1].root == 0 && !is_interior(&tr[0].node[0]) &&
                  !is_interior(&tr[1].node[0]),
              "n=1: expected a lone root 0 in both trees");
        return;
    }
    for (int r = 0; r < n; r++) {
        int i0 = is_interior(&tr[0].node[r]), i1 = is_interior(&tr[1].node[r]);
        if (i0 && i1 && both_interior < 0) both_interior = r;
        if (!i0 && !i1) both_leaf++;
    }
    CHECK(both_interior < 0, "n=%d: rank %d is interior in both trees", n, both_interior);
    CHECK(both_leaf <= n % 2, "n=%d: %d ranks are leaves in both trees (at most %d)", n, both_leaf,
          n % 2);
    CHECK(tr[0].root != tr[1].root, "n=%d: both trees rooted at %d", n, tr[0].root);
}

static void check_invalid(void)
{
    static const int args[][3] = {{0, 0, 0}, {-1, 0, 0}, {RCOLL_DBTREE_MAX_RANKS + 1, 0, 0},
                                  {4, 4, 0},  {4, -1, 0}, {4, 1, 2},
                                  {4, 1, -1}};
    for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++) {
        rcoll_tree_node_t nd = {7, {7, 7}};
        int root = 7;
        rcoll_dbtree_node(args[i][0], args[i][1], args[i][2], &nd, &root);
        CHECK(nd.parent == -1 && nd.child[0] == -1 && nd.child[1] == -1 && root == -1,
              "invalid (n=%d rank=%d t=%d) not rejected", args[i][0], args[i][1], args[i][2]);
    }
    CHECK(rcoll_dbtree_depth(1) == 0 && rcoll_dbtree_depth(2) == 1 && rcoll_dbtree_depth(8) == 3 &&
              rcoll_dbtree_depth(9) == 3,
          "rcoll_dbtree_depth small values");
}

/* The n = 8 picture in tree.c's header, verbatim. */
static void check_picture(tree_t tr[2])
{
    static const int parent0[8] = {1, 3, 1, 7, 5, 3, 5, -1};
    check_dbtree(8, tr);
    for (int r = 0; r < 8; r++) {
        CHECK(tr[0].node[r].parent == parent0[r], "n=8 t=0 rank %d: parent %d, picture says %d", r,
              tr[0].node[r].parent, parent0[r]);
        int s = (r + 1) % 8, p1 = parent0[r] < 0 ? -1 : (parent0[r] + 1) % 8;
        CHECK(tr[1].node[s].parent == p1, "n=8 t=1 rank %d: parent %d, picture says %d", s,
              tr[1].node[s].parent, p1);
    }
}

int main(void)
{
    static const int big[] = {4095, 4096, 65535, 65537, RCOLL_DBTREE_MAX_RANKS - 1,
                              RCOLL_DBTREE_MAX_RANKS};
    const int maxn = RCOLL_DBTREE_MAX_RANKS;
    tree_t tr[2];

    for (int t = 0; t < 2; t++) {
        tr[t].node = malloc(sizeof(*tr[t].node) * (size_t)maxn);
        tr[t].queue = malloc(sizeof(int) * (size_t)maxn);
        tr[t].seen = malloc((size_t)maxn);
        if (!tr[t].node || !tr[t].queue || !tr[t].seen) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
    }

    check_invalid();
    check_picture(tr);
    for (int n = 1; n <= 1024; n++) check_dbtree(n, tr);
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) check_dbtree(big[i], tr);

    for (int t = 0; t < 2; t++) {
        free(tr[t].node);
        free(tr[t].queue);
        free(tr[t].seen);
    }
    return check_summary();
}
