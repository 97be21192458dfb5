#!/usr/bin/env python3
"""k-means on the same vectors with faiss-cpu and scikit-learn, beside ours.

    cargo run --release -p curator-vectors --example kmeans-bench -- N D K ITERS /tmp/vec.f32 cpu /tmp/removed.txt
    python3 scripts/semdedup/bench.py /tmp/vec.f32 D K ITERS [/tmp/removed.txt]   # pip install faiss-cpu scikit-learn

Same iteration count asked everywhere (ours and scikit-learn run them all; faiss stops by
itself once converged (faiss 1.15 ran 6 of 10 asked here): `faiss_iterations` says how many it
ran), one initialisation each; prints seconds and inertia per library, and with REMOVED (ours, at eps 0.01, keep "hard") the
Jaccard of each library's removed set, and of its (removed, nearest earlier) pairs, with ours
(the same SemDeDup pass on its clusters).
"""
import json
import sys
import time

import numpy as np


def removed_set(x, labels, centroids, eps=0.01):
    """SemDeDup's pass: per cluster, farthest from the centroid first; a row whose largest
    cosine similarity to an earlier row is >= 1 - eps is removed."""
    out = {}
    dist = ((x - centroids[labels]) ** 2).sum(1)
    for c in np.unique(labels):
        ids = np.where(labels == c)[0]
        if len(ids) < 2:
            continue
        ids = ids[np.lexsort((ids, -dist[ids]))]
        e = x[ids]
        s = np.triu(e @ e.T, k=1)
        best, arg = s.max(0), s.argmax(0)
        for j in np.where(best >= 1 - eps)[0]:
            if j > 0:
                out[int(ids[j])] = int(ids[arg[j]])
    return out


def main():
    path, d, k, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    x = np.fromfile(path, dtype=np.float32).reshape(-1, d)
    out = {"n": len(x), "d": d, "k": k, "iterations": iters}
    import faiss
    t = time.perf_counter()
    km = faiss.Kmeans(d, k, niter=iters, seed=42, max_points_per_centroid=10**9)
    km.train(x)
    out["faiss_s"] = time.perf_counter() - t
    dist, _ = km.index.search(x, 1)
    out["faiss_inertia"] = float(dist.sum())
    out["faiss_iterations"] = len(km.obj)
    out["faiss_threads"] = faiss.omp_get_max_threads()
    from sklearn.cluster import KMeans
    t = time.perf_counter()
    sk = KMeans(n_clusters=k, max_iter=iters, tol=0.0, n_init=1, random_state=42).fit(x)
    out["sklearn_s"] = time.perf_counter() - t
    out["sklearn_inertia"] = float(sk.inertia_)
    if len(sys.argv) > 5:
        ours = dict(tuple(map(int, l.split())) for l in open(sys.argv[5]) if l.strip())
        pairs = lambda m: {frozenset(p) for p in m.items()}
        _, flabels = km.index.search(x, 1)
        for name, labels, cents in (("faiss", flabels[:, 0], km.centroids), ("sklearn", sk.labels_, sk.cluster_centers_.astype(np.float32))):
            theirs = removed_set(x, labels, cents)
            out[f"{name}_removed"] = len(theirs)
            a, b = set(ours), set(theirs)
            out[f"{name}_removed_jaccard_with_ours"] = round(len(a & b) / max(len(a | b), 1), 4)
            # Which member of a pair stays depends on the centroids; the pairs found should not.
            pa, pb = pairs(ours), pairs(theirs)
            out[f"{name}_pairs_jaccard_with_ours"] = round(len(pa & pb) / max(len(pa | pb), 1), 4)
        out["ours_removed"] = len(ours)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
