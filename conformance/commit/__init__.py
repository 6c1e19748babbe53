"""The commit-family suites: store level and commit level (registered by ``conformance.commit.suites``)."""
