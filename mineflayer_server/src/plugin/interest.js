'use strict'
// What each player is told about, as on a vanilla server: stock flying-squid sends every block change to
// every player of the world, and every entity's moves to every player within 150 blocks. With K arenas
// on one server each bot then decoded the block edits and the bots' and items' moves of about every other
// arena (a profile of 8 arenas: the packet streams, framing, compression and parsing on both ends,
// held 43 % of the sidecar's busy time; block_change was its most frequent packet). Here:
//
// - a block change goes only to players that have its chunk loaded (vanilla's rule; a client drops it
//   otherwise, and a chunk sent later carries the block as it is then);
// - with `arenas` ({x0, spacing, halfWidth}: arena k's region is |x - (x0 + k spacing)| < halfWidth and
//   |z| < halfWidth), players see the entities of their own arena only, and those outside every arena (the
//   lobby) see each other. Spawning, moving and despawning all go through `serv.getNearbyEntities`, so a
//   player's view of entities stays consistent as it is teleported between the lobby and an arena.
//
// Without `arenas` (a server standing in for an external one in tests) entities are seen as stock.

/** The arena (its slot) whose region holds `pos`, or null outside every arena. */
function areaOf (pos, { x0, spacing, halfWidth }) {
  const slot = Math.round((pos.x - x0) / spacing)
  const inside = Math.abs(pos.x - (x0 + slot * spacing)) < halfWidth && Math.abs(pos.z) < halfWidth
  return inside ? slot : null
}

function server (serv, api, { arenas } = {}) {
  if (!arenas) return
  const stock = serv.getNearbyEntities
  serv.getNearbyEntities = query => {
    const area = areaOf(query.position, arenas)
    return stock(query).filter(e => areaOf(e.position, arenas) === area)
  }
}

function player (player) {
  const write = player._client.write.bind(player._client)
  player._client.write = function (name, params) {
    if (name === 'block_change') {
      const { x, z } = params.location
      if (player.loadedChunks && player.loadedChunks[`${Math.floor(x / 16)},${Math.floor(z / 16)}`] === undefined) return
    }
    return write(name, params)
  }
}

module.exports = { server, player, areaOf }
