'use strict'
// Who is told of a block change, as on a vanilla server: only players that have its chunk loaded (a
// client drops the others' anyway, and a chunk sent later carries the block as it is then). Stock
// flying-squid sends every block change to every player of the world, so with K arenas on one server
// each bot decoded the block edits of every other arena: a profile of 8 arenas had the packet streams
// (framing, compression and parsing on both ends) at 43 % of the sidecar's busy time, and block_change
// as its most frequent packet.

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

module.exports = { player }
