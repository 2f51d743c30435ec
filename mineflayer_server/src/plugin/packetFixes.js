'use strict'
// Packet fixes that make flying-squid 1.12.0 speak valid Minecraft 1.21.4 to mineflayer clients.
// Without them a teleport (or any move of more than a few blocks) disconnects every other client,
// players appear as boats, and a player can see a peer's entity without ever learning whose it is.

const LOGIN_PLUGIN = /flying-squid[\\/]src[\\/]lib[\\/]plugins[\\/]login\.js/

/**
 * flying-squid starts a 5 s tab-list latency interval per player and never clears it, so a process
 * that embeds the server could never exit on its own. Those timers are unref'd (narrowly: only
 * intervals created from flying-squid's login plugin).
 */
function server () {
  if (global.setInterval.gcUnrefsLoginTimers) return
  const setIntervalOriginal = global.setInterval
  const patched = function (fn, ms, ...args) {
    const timer = setIntervalOriginal.call(this, fn, ms, ...args)
    if (LOGIN_PLUGIN.test(new Error().stack)) timer.unref()
    return timer
  }
  patched.gcUnrefsLoginTimers = true
  global.setInterval = patched
}

function player (player, serv) {
  const registry = serv.registry
  const modern = registry.version['>=']('1.21.2')
  const playerType = registry.entitiesByName.player.id
  const write = player._client.write.bind(player._client)
  // As on a vanilla server, movement packets sent before the client confirms the newest server teleport
  // are stale and ignored; otherwise a packet in flight moves the player straight back after /tp or reset
  // (and an idle bot, whose physics is held, never sends the position that would undo it). flying-squid
  // gives every teleport the id 1, so a confirmation could not say which one it answers: each position
  // packet gets an id of its own here, and moves count again once the newest id is confirmed, however
  // late (a count of confirmations with a 2 s escape let a stale move through on a machine that stalled).
  let lastTeleportId = 0
  let awaiting = null // the id of the newest teleport the client has not confirmed
  let teleporting = false // a server teleport is being applied; its position packet is not sent yet

  let lastTabRequest = 0
  player._client.prependListener('tab_complete', data => { lastTabRequest = data.transactionId ?? 0 })

  player._client.write = function (name, params) {
    if (player.disconnected) return // e.g. the leaked latency timer above, after the player left
    if (name === 'position') {
      lastTeleportId = lastTeleportId % 0x7fffffff + 1 // a VarInt
      params = { ...params, teleportId: lastTeleportId }
      awaiting = lastTeleportId
      teleporting = false
    }
    if (modern && name === 'entity_teleport') {
      // 1.21.2 added a velocity delta and relative-flags to entity_teleport; flying-squid omits them
      // and the serializer error kills the receiving connection.
      params = { dx: 0, dy: 0, dz: 0, flags: { _value: 0 }, ...params }
    }
    // flying-squid's sound_effect layout predates 1.21; clients log "partial packet" errors. Sounds are cosmetic.
    if (modern && name === 'sound_effect') return
    // 1.13+ command suggestions carry the request's transaction id, a range and {match, tooltip} entries;
    // flying-squid sends bare strings, which fail to serialize. Clients match replies by that id.
    if (name === 'tab_complete' && !('transactionId' in params)) {
      params = { transactionId: lastTabRequest, start: 0, length: 0, matches: (params.matches || []).map(m => (typeof m === 'string' ? { match: m } : m)) }
    }
    // Players are spawned through the unified spawn_entity packet with type null (id 0 = a boat on 1.21.4).
    if (name === 'spawn_entity' && serv.entities[params.entityId]?.type === 'player') {
      params = { ...params, type: playerType }
    }
    return write(name, params)
  }

  player.on('spawned', () => {
    // After 'spawned', flying-squid waits for the client's first 'flying'/'look' packet and then resends
    // the login position, which undoes any teleport made in between (e.g. by the first reset).
    // Resend it at once instead, while the player is still where it logged in.
    player.waitPlayerLogin = () => Promise.resolve()
  })

  const sendPosition = player.sendPosition
  player.sendPosition = function (position, onGround, teleport = false) {
    if (!teleport) return teleporting || awaiting !== null ? Promise.resolve(false) : sendPosition.call(this, position, onGround)
    teleporting = true
    // a teleport that a plugin cancelled sends no position packet: moves count again at once
    return sendPosition.call(this, position, onGround, true).then(sent => { if (!sent) teleporting = false; return sent })
  }
  player._client.on('teleport_confirm', ({ teleportId }) => { if (teleportId === awaiting) awaiting = null })

  // A client names a player entity by the player list entry it already has for the entity's uuid: one
  // spawned before that entry stays nameless for good (mineflayer looks the entity up by name when the
  // entry comes), so its peer never appears in `bot.players`. flying-squid sends the newcomer no list of
  // the players already there, and two logins at once can each miss the other's announcement. So every
  // player entity spawned to this player is preceded by its list entry, the first time.
  // flying-squid's own player hook, which defines spawnEntity, runs after this one: the wrapper stays in
  // front of whatever it assigns.
  const listed = new WeakSet()
  let spawnEntity = player.spawnEntity
  const listedSpawn = function (entity) {
    if (entity.type === 'player' && !listed.has(entity) && registry.supportFeature('playerInfoActionIsBitfield')) {
      listed.add(entity)
      write('player_info', {
        action: { add_player: true, update_game_mode: true, update_listed: true, update_latency: true },
        data: [{
          uuid: entity.uuid,
          player: { name: entity.username, properties: entity.profileProperties || [] },
          gamemode: entity.gameMode,
          listed: true,
          latency: 0
        }]
      })
    }
    return spawnEntity.call(this, entity)
  }
  Object.defineProperty(player, 'spawnEntity', { configurable: true, enumerable: true, get: () => listedSpawn, set: fn => { spawnEntity = fn } })
}

module.exports = { server, player }
