"""Connectors over Ratchet's saga runtime: Redis Streams, gRPC with mutual TLS, Kafka (seed 002, Transport).

A connector authenticates an envelope (an HMAC signature on a stream, the client certificate on
gRPC), calls the runtime through a ``DeliveryHandler`` (``ParticipantHandler``,
``OrchestratorHandler``) and maps the outcome's verdict to its acknowledgement. The rules are
``S-STREAM-*``, ``S-GRPC-*`` and ``S-KAFKA-*`` in docs/saga-contract.md; the guide is docs/transports.md.
"""

from ._grpc import COMMAND as COMMAND
from ._grpc import RESULT as RESULT
from ._grpc import AuthenticatedOnly as AuthenticatedOnly
from ._grpc import DeliveryServicer as DeliveryServicer
from ._grpc import GrpcDeliveryClient as GrpcDeliveryClient
from ._grpc import GrpcListener as GrpcListener
from ._grpc import MtlsClient as MtlsClient
from ._grpc import ReplyHook as ReplyHook
from ._grpc import principal_of as principal_of
from ._handlers import BusinessCode as BusinessCode
from ._handlers import DeliveryHandler as DeliveryHandler
from ._handlers import OrchestratorHandler as OrchestratorHandler
from ._handlers import ParticipantHandler as ParticipantHandler
from ._handlers import PoisonMessage as PoisonMessage
from ._kafka import BEFORE_OFFSET_COMMIT as BEFORE_OFFSET_COMMIT
from ._kafka import KafkaCommandConsumer as KafkaCommandConsumer
from ._kafka_admin import DeadLetterReader as DeadLetterReader
from ._kafka_admin import KafkaAdmin as KafkaAdmin
from ._kafka_records import KafkaPublisher as KafkaPublisher
from ._kafka_records import KafkaRecord as KafkaRecord
from ._kafka_records import KafkaSettled as KafkaSettled
from ._kafka_records import KafkaTopics as KafkaTopics
from ._kafka_records import client_config as client_config
from ._kafka_records import from_record as from_record
from ._kafka_records import produce_acknowledged as produce_acknowledged
from ._kafka_records import to_headers as to_headers
from ._redis_client import open_fakeredis_client as open_fakeredis_client
from ._redis_client import open_redis_client as open_redis_client
from ._streams import AFTER_HANDLER as AFTER_HANDLER
from ._streams import DEAD_LETTER_SCRIPT as DEAD_LETTER_SCRIPT
from ._streams import FaultHook as FaultHook
from ._streams import InHand as InHand
from ._streams import Lifecycle as Lifecycle
from ._streams import Settled as Settled
from ._streams import StreamConsumer as StreamConsumer
from ._streams import StreamNames as StreamNames
from ._streams import StreamPublisher as StreamPublisher
from ._streams import TransportError as TransportError
from ._streams import no_faults as no_faults
from ._tls import Authority as Authority
from ._tls import Identity as Identity
from ._tls import Pki as Pki
from ._trim import GroupBacklog as GroupBacklog
from ._trim import StreamAdmin as StreamAdmin
from ._trim import StreamId as StreamId
from ._trim import format_id as format_id
from ._trim import parse_id as parse_id
from ._wire import from_fields as from_fields
from ._wire import to_fields as to_fields
