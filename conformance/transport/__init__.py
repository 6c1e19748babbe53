"""The transport suite: Redis Streams and gRPC/mTLS connectors over a saga runtime, beside the model."""
