"""The Minecraft sidecar's Node sources (``src/``, ``package.json``, lockfile), installed with the Python
package as ``gencoord_env.mineflayer_server`` so that ``gencoord setup`` finds them in any install.
Nothing here is Python code to import; see ``README.md`` in this folder."""
