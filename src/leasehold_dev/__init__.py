"""leasehold's development stack: the embedded local stack (moto in its own process, the local
gateway, pumps and worker processes, the local providers and the moto patches), the demo, the
smoke run and the `leasehold` command. Never part of a deployed function's build: the engine
(`leasehold`) and the applications (`leasehold_apps`) never import it."""
