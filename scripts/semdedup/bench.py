#!/usr/bin/env python3
"""k-means on the same vectors with faiss-cpu and scikit-learn, beside ours.

    cargo run --release -p curator-vectors --example kmeans-bench -- N D K ITERS /tmp/vec.f32
    python3 scripts/semdedup/bench.py /tmp/vec.f32 D K ITERS      # pip install faiss-cpu scikit-learn

Same iteration count everywhere (tol 0 / no early stop), one initialisation each; prints
seconds and inertia per library.
"""
import json
import sys
import time

import numpy as np


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
    out["faiss_threads"] = faiss.omp_get_max_threads()
    from sklearn.cluster import KMeans
    t = time.perf_counter()
    sk = KMeans(n_clusters=k, max_iter=iters, tol=0.0, n_init=1, random_state=42).fit(x)
    out["sklearn_s"] = time.perf_counter() - t
    out["sklearn_inertia"] = float(sk.inertia_)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
