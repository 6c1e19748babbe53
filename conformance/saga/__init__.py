"""The saga family: runtime-level suite over any SagaBackend, the model beside it."""
