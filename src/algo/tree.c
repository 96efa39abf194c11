/*
 * tree.c - construction of the double binary tree (rank -> parent, children, root).
 * Only arithmetic on rank numbers: it knows nothing of transports, chunks or data, and
 * must not allocate or log (schedules call it per rank at setup).
 *
 * Tree 0 is the in-order binary tree over positions p = rank + 1 in 1..n: the level of p
 * is the number of trailing zeros of p, the root is the largest power of two 2^m <= n,
 * node p at level k > 0 has children p - 2^(k-1) and p + 2^(k-1); where the right one is
 * past n it is replaced by the top of what is left, (p, n].  Tree 1 is tree 0 shifted by
 * one rank (r -> (r + 1) mod n).  n = 8 (depth 3, every rank interior exactly once):
 *
 *     tree 0            7              tree 1            0
 *                      /                                /
 *                     3                                4
 *                  /     \                          /     \
 *                 1       5                        2       6
 *                / \     / \                      / \     / \
 *               0   2   4   6                    1   3   5   7
 *
 *     interior {1,3,5,7}, leaves {0,2,4,6}        interior {0,2,4,6}, leaves {1,3,5,7}
 *
 * Why it holds for every n:
 *  - Tree 0: odd p (even ranks) are leaves; every even p has its left child p - 2^(k-1)
 *    >= 1, so exactly the odd ranks are interior.  Levels strictly increase towards the
 *    root, so depth = m = floor(log2 n) <= ceil(log2 n) (one less than NCCL's, whose
 *    root 0 has a single child above the 2^m subtree, for n not a power of two).
 *  - Tree 1: rank s plays the role of rank (s - 1) mod n, so it is interior iff that is
 *    odd: the even s in 2..n-1, plus s = 0 iff n - 1 is odd (n even).  All even, so
 *    disjoint from tree 0's interior.  For odd n rank 0 is a leaf in both trees: a tree
 *    with n nodes needs >= (n-1)/2 interior nodes, so the two take (n-1)/2 each and one
 *    rank is left over.  Roots: 2^m - 1 and 2^m mod n, different for n >= 2.
 *  - Mirroring (r -> n-1-r), which NCCL uses for even n, also works for even n here but
 *    fails for odd n (n-1-r has the parity of r, so interior sets coincide); NCCL's
 *    shift for odd n leaves its root 0 interior in both trees.  The shift is used for all n.
 */
#include <stddef.h>

#include "algo/tree.h"

/* Trailing zeros of p > 0. */
static int tree_ctz(int p)
{
    int k = 0;
    while (!(p & 1)) {
        p >>= 1;
        k++;
    }
    return k;
}

/* Largest power of two <= x, for x >= 1. */
static int tree_pow2_floor(int x)
{
    int v = 1;
    while (v <= x / 2) v <<= 1;
    return v;
}

/* Tree 0 in positions (1..n, rank + 1); 0 where there is no such node. */
static void tree0_pos(int n, int p, int *parent, int *left, int *right)
{
    int k = tree_ctz(p);
    int top = tree_pow2_floor(n);

    *left = *right = 0;
    if (k > 0) {
        int half = 1 << (k - 1);
        *left = p - half;
        if (p < n) {
            int gap = tree_pow2_floor(n - p); /* top of (p, n] when p + half is past n */
            *right = p + (gap < half ? gap : half);
        }
    }

    /* Climb the unclipped tree (parent of an odd multiple of 2^k is the neighbour
     * multiple of 2^(k+1)) until inside 1..n; the first ancestor there is the parent. */
    *parent = 0;
    if (p != top) {
        int q = p;
        do {
            int step = 1 << k;
            q = (q & (step << 1)) ? q - step : q + step;
            k++;
        } while (q > n);
        *parent = q;
    }
}

void rcoll_dbtree_node(int nranks, int rank, int t, rcoll_tree_node_t *node, int *root)
{
    int parent, left, right, r, shift;

    node->parent = node->child[0] = node->child[1] = -1;
    if (root) *root = -1;
    if (nranks < 1 || nranks > RCOLL_DBTREE_MAX_RANKS || rank < 0 || rank >= nranks ||
        (t != 0 && t != 1))
        return;

    shift = t; /* tree 1: rank s takes tree 0's node (s - 1) mod n, links shifted by +1 */
    r = (rank - shift + nranks) % nranks;
    tree0_pos(nranks, r + 1, &parent, &left, &right);

    /* position x (1..n) -> rank of tree t: (x - 1 + shift) mod n */
    if (parent) node->parent = (parent - 1 + shift) % nranks;
    if (left) node->child[0] = (left - 1 + shift) % nranks;
    if (right) node->child[1] = (right - 1 + shift) % nranks;
    if (root) *root = (tree_pow2_floor(nranks) - 1 + shift) % nranks;
}

int rcoll_dbtree_depth(int nranks)
{
    int d = 0;

    while (nranks > 1) {
        nranks >>= 1;
        d++;
    }
    return d;
}
