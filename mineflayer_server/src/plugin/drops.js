'use strict'
// Thrown items become item entities carrying the whole stack; a player standing close picks up the
// whole stack. Stock flying-squid makes tossed items vanish. Every pickup of an item thrown by another
// player is recorded in a ledger: the server-truth evidence of a handoff. A toss is meant for its receiver
// (`api.reserveTosses(thrower, receiver)`, set by the give before it tosses): with three or more bots in
// an arena a bystander next to the toss never takes items meant for someone else.

const { Vec3 } = require('vec3')

/** One game tick, the longest step an item's physics takes. */
const TICK_S = 0.05

function server (serv, api, options) {
  const registry = serv.registry
  const itemType = registry.entitiesByName.item.id
  const pickupDelayMs = options.pickupDelayMs ?? 100
  const throwerDelayMs = options.throwerDelayMs ?? 2000
  const ledger = []
  const receiverOf = new Map() // thrower username -> the username its tosses are meant for

  /** The unit vector a toss by `player` flies along: its look as the server has it. */
  api.tossDirection = player => {
    // flying-squid keeps yaw/pitch as protocol angle bytes (256 = full turn).
    const yaw = (player.yaw || 0) * 2 * Math.PI / 256
    const pitch = (player.pitch || 0) * 2 * Math.PI / 256
    return new Vec3(-Math.sin(yaw) * Math.cos(pitch), -Math.sin(pitch), Math.cos(yaw) * Math.cos(pitch))
  }

  /** Spawn an item entity thrown in the player's look direction. */
  api.dropItem = (player, item) => {
    if (!item || item.count <= 0) return null
    const dir = api.tossDirection(player)
    const entity = serv.spawnObject(itemType, player.world, player.position.offset(0, 1.3, 0), {
      velocity: new Vec3(dir.x * 4, 2 + dir.y * 2, dir.z * 4),
      itemId: item.type,
      itemCount: item.count,
      deathTime: 5 * 60 * 1000
    })
    // flying-squid moves an entity by the wall time since the last tick and checks only the block the
    // step ends in: after a stall of the event loop (a busy machine) one step of gravity ends below the
    // floor, and a lying item falls out of the world. A vanilla server moves entities one tick per tick.
    const physics = entity.calculatePhysics
    entity.calculatePhysics = delta => physics(Math.min(delta, TICK_S))
    entity.gcItem = new api.Item(item.type, item.count, item.metadata, item.nbt)
    entity.gcThrower = player.username
    entity.gcThrowerId = player.id
    entity.gcFor = receiverOf.get(player.username) || null
    return entity
  }

  /** The tosses of `thrower` are meant for `receiver` from now on (null: for whoever is near). */
  api.reserveTosses = (thrower, receiver) => {
    if (receiver) receiverOf.set(thrower, receiver)
    else receiverOf.delete(thrower)
  }

  /** Pickups of items thrown by one player and collected by another: `{from, to, item, count, at}`. */
  api.pickups = () => ledger
  /** Forget the pickups that `which(entry)` selects (default: all), e.g. those of one arena's players. */
  api.clearPickups = (which = null) => {
    const keep = which ? ledger.filter(p => !which(p)) : []
    ledger.length = 0
    ledger.push(...keep)
  }

  /** Remove the dropped item entities at positions `where(pos)` selects (default: all). Returns how many. */
  api.clearDrops = (where = null) => {
    let n = 0
    for (const entity of Object.values(serv.entities)) {
      if (entity.gcItem && (!where || where(entity.position))) { entity.gcItem = null; entity.destroy(); n++ }
    }
    return n
  }

  function near (player, entity) {
    const dy = entity.position.y - player.position.y
    return Math.hypot(player.position.x - entity.position.x, player.position.z - entity.position.z) < 1.5 && dy > -1 && dy < 2.5
  }

  serv.on('tick', () => {
    const now = Date.now()
    for (const entity of Object.values(serv.entities)) {
      if (!entity.gcItem) continue
      const age = now - entity.bornTime
      if (age < pickupDelayMs) continue
      const taker = serv.players.find(p => p.world === entity.world && p.gameMode !== 3 &&
        !(p.id === entity.gcThrowerId && age < throwerDelayMs) && (!entity.gcFor || p.username === entity.gcFor) &&
        near(p, entity))
      if (!taker) continue
      const left = api.addToInventory(taker, entity.gcItem)
      const taken = entity.gcItem.count - left
      if (taken <= 0) continue
      entity._writeOthersNearby('collect', { collectedEntityId: entity.id, collectorEntityId: taker.id, pickupItemCount: taken })
      if (entity.gcThrower && entity.gcThrower !== taker.username) {
        ledger.push({ from: entity.gcThrower, to: taker.username, item: entity.gcItem.name, count: taken, at: now })
      }
      if (left > 0) entity.gcItem.count = left
      else { entity.gcItem = null; entity.destroy() }
    }
  })
}

module.exports = { server }
