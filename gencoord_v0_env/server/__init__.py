"""The server of the gencoord_v0 OpenEnv environment (``server.app:app``)."""
