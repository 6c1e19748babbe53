# Real services for the tests (scripts/services): install when missing, start on 127.0.0.1.
#   make services          start all (idempotent: a fast no-op when they already answer)
#   make services-stop     stop all
#   make services-status   show what is up (exit 3 when something is down)
# SERVICES=redis make services  starts a subset.
SERVICES_SCRIPT := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))/../scripts/services
SERVICES ?= all

.PHONY: services services-stop services-status

services:
	$(SERVICES_SCRIPT) up $(SERVICES)

services-stop:
	$(SERVICES_SCRIPT) down $(SERVICES)

services-status:
	$(SERVICES_SCRIPT) status
