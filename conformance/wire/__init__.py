"""Faults on the wire: a loopback TCP proxy between each network backend's driver and its server.

``FaultProxy`` (``_proxy``) forwards and, when armed, loses an answer, resets before a request,
stalls an answer, loses a request or refuses every connection; ``route`` (``_routes``) puts one in
front of a service's endpoint; the fault kinds that drive it around one backend call are in
``_faults``.
"""

from conformance.wire._faults import PARTITION as PARTITION
from conformance.wire._faults import SAGA_WIRE_FAULTS as SAGA_WIRE_FAULTS
from conformance.wire._faults import STORE_WIRE_FAULTS as STORE_WIRE_FAULTS
from conformance.wire._faults import WIRE as WIRE
from conformance.wire._faults import WIRE_COMMIT_REPLY_LOST as WIRE_COMMIT_REPLY_LOST
from conformance.wire._faults import WIRE_COMMIT_RESET_BEFORE as WIRE_COMMIT_RESET_BEFORE
from conformance.wire._faults import WIRE_REPLY_LOST as WIRE_REPLY_LOST
from conformance.wire._faults import WIRE_REQUEST_LOST as WIRE_REQUEST_LOST
from conformance.wire._faults import WIRE_RESET_BEFORE as WIRE_RESET_BEFORE
from conformance.wire._faults import WIRE_STALL as WIRE_STALL
from conformance.wire._proxy import FaultProxy as FaultProxy
from conformance.wire._proxy import Hit as Hit
from conformance.wire._proxy import WireAction as WireAction
from conformance.wire._routes import WireRoute as WireRoute
from conformance.wire._routes import accepts_endpoint as accepts_endpoint
from conformance.wire._routes import route as route
