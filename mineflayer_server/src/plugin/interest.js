'use strict'
// What each player is told about. Stock flying-squid sends every block change to every player of the
// world, and every entity's moves to every player within 150 blocks. With K arenas on one server each bot
// then decoded the block edits and the bots' and items' moves of about every other arena (a profile of 8
// arenas: the packet streams, framing, compression and parsing on both ends, held 43 % of the sidecar's
// busy time; block_change was its most frequent packet). Here:
//
// - a block change goes only to players that have its chunk loaded (vanilla's rule; a client drops it
//   otherwise, and a chunk sent later carries the block as it is then);
// - with `arenas` ({x0, spacing, halfWidth}: arena k's region is |x - (x0 + k spacing)| < halfWidth and
//   |z| < halfWidth), a player sees the entities of its own arena only, and those outside every arena (the
//   lobby) see each other.
//
// The entity view is tracked as on a vanilla server: each entity keeps the players it was spawned to
// (`gcViewers`), its moves, looks, equipment and destruction go to exactly those, and whenever it or a
// player changes arena (a teleport: `move_done`, after the new position is set) the view is recomputed
// both ways: who newly sees it is sent its spawn at its current place, who no longer does its destruction.
// Stock flying-squid instead recomputes "who is near" for every packet from the entity's position before
// the move, and updates views only on the mover's next move: a bot teleported into its arena after its
// peer was never told where the peer went, and an idle bot never moves again.
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
  const alive = e => serv.entities[e.id] === e
  // a player joins the view at its login's first updateAndSpawn, when its position is its spawn point
  const sees = (p, e) => p !== e && p.gcInView && alive(e) && (e.type !== 'player' || e.gcInView) &&
    p.world === e.world && areaOf(p.position, arenas) === areaOf(e.position, arenas)

  function show (p, e) {
    const want = sees(p, e)
    if (want === e.gcViewers.has(p)) return
    if (want) {
      e.gcViewers.add(p)
      p.spawnEntity(e)
    } else {
      e.gcViewers.delete(p)
      p.despawnEntities([e])
    }
  }

  /** Bring `e`'s viewers, and what `e` sees if it is a player, in line with where everyone is now. */
  function refresh (e) {
    e.gcArea = areaOf(e.position, arenas)
    e.lastPositionPlayersUpdated = e.position.clone()
    if (e.type === 'player') e.gcInView = !e.disconnected
    for (const p of serv.players) if (p !== e) show(p, e)
    if (e.type === 'player') for (const id in serv.entities) if (serv.entities[id] !== e) show(e, serv.entities[id])
  }

  serv.on('newEntity', entity => {
    entity.gcViewers = new Set()
    entity.gcInView = false
    entity.updateAndSpawn = () => refresh(entity)
    entity.getNearbyPlayers = () => [...entity.gcViewers]
    entity.nearbyPlayers = () => [...entity.gcViewers]
    Object.defineProperty(entity, 'nearbyEntities', {
      configurable: true,
      get: () => Object.values(serv.entities).filter(x => x.gcViewers.has(entity)),
      set: () => {} // flying-squid's respawn clears it to spawn everything again; refresh does that
    })
    entity.on('move_done', () => {
      if (alive(entity) && areaOf(entity.position, arenas) !== entity.gcArea) refresh(entity)
    })
    if (entity.type !== 'player') return
    entity.once('disconnected', () => {
      entity.gcInView = false
      entity.gcViewers.clear()
      for (const id in serv.entities) serv.entities[id].gcViewers?.delete(entity)
    })
  })

  const destroyEntity = serv.destroyEntity
  serv.destroyEntity = entity => {
    destroyEntity(entity) // tells its viewers
    entity.gcViewers.clear()
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
