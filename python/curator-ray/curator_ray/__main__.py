from curator_ray.cli import main

raise SystemExit(main())
