"""The transport suite: Redis Streams and gRPC/mTLS connectors over a saga runtime, beside the model."""

import os

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # failed handshakes are the point of some rules, not news
