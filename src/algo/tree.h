/*
 * tree.h - the double binary tree: two complementary binary trees over the same n ranks,
 * each carrying half of the data, such that a rank that forwards (is interior) in one tree
 * is a leaf in the other.  Pure arithmetic: no I/O, no allocation, O(log n) per call.
 */
#ifndef RCOLL_ALGO_TREE_H
#define RCOLL_ALGO_TREE_H

#define RCOLL_DBTREE_MAX_RANKS (1 << 20)

/* One rank's links in one tree; -1 where there is none.  child[0] is set whenever child[1]
 * is (an interior node always has child[0]; child[1] may be missing). */
typedef struct {
    int parent;
    int child[2];
} rcoll_tree_node_t;

/*
 * Node of `rank` in tree t (0 or 1) of the double binary tree over nranks ranks (out:
 * *node), and the root of that tree (out: *root; may be NULL).  Every rank gets the same
 * root.  Preconditions: 1 <= nranks <= RCOLL_DBTREE_MAX_RANKS, 0 <= rank < nranks,
 * t in {0, 1}; outside them *node is all -1 and *root is -1.
 *
 * Guarantees (tested exhaustively, tests/unit/test_tree.c): each tree spans all ranks with
 * consistent parent/child links; depth <= rcoll_dbtree_depth(nranks); for nranks >= 2 no
 * rank is interior in both trees, the two roots differ, and at most one rank (only for
 * odd nranks: rank 0) is a leaf in both.
 */
void rcoll_dbtree_node(int nranks, int rank, int t, rcoll_tree_node_t *node, int *root);

/* Levels below the root of either tree (both have the same shape): floor(log2 nranks),
 * which is <= ceil(log2 nranks) and the minimum for any binary tree; 0 for nranks <= 1. */
int rcoll_dbtree_depth(int nranks);

#endif
