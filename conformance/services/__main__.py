"""``python -m conformance.services up|down|status|env [service ...]`` (what scripts/services runs)."""

from conformance.services._launcher import main

raise SystemExit(main())
