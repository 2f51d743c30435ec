'use strict'
// Packet fixes that make flying-squid 1.12.0 speak valid Minecraft 1.21.4 to mineflayer clients.
// Without them a teleport (or any move of more than a few blocks) disconnects every other client,
// players appear as boats, and a player who joins second never learns about the first.

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
  // As on a vanilla server, movement packets sent before the client confirms a server teleport are
  // stale and ignored; otherwise a packet in flight moves the player straight back after /tp or reset.
  // flying-squid gives every teleport the id 1, so a confirmation cannot say which one it answers; the
  // position packets sent are counted instead (from login on): a client that confirms the login
  // position's resend and then reports where it stood has not yet seen the reset's teleport that followed.
  let unconfirmed = 0
  let since = 0 // when the last teleport began or its position packet went out
  let teleporting = false // a server teleport is being applied; its position packet is not sent yet

  let lastTabRequest = 0
  player._client.prependListener('tab_complete', data => { lastTabRequest = data.transactionId ?? 0 })

  player._client.write = function (name, params) {
    if (player.disconnected) return // e.g. the leaked latency timer above, after the player left
    if (name === 'position') {
      unconfirmed++
      teleporting = false
      since = Date.now()
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
    if (teleport) {
      teleporting = true
      since = Date.now()
    } else if ((teleporting || unconfirmed > 0) && Date.now() - since < 2000) {
      return Promise.resolve(false)
    }
    return sendPosition.call(this, position, onGround, teleport)
  }
  player._client.on('teleport_confirm', () => { unconfirmed = Math.max(0, unconfirmed - 1) })

  // flying-squid announces a new player to the others but never sends the newcomer the existing list,
  // so mineflayer cannot map the earlier player's entity to a name. Send it just before entities spawn.
  const updateAndSpawn = player.updateAndSpawn
  let sent = false
  player.updateAndSpawn = function (...args) {
    if (!sent && registry.supportFeature('playerInfoActionIsBitfield')) {
      sent = true
      const others = serv.players.filter(p => p !== player)
      if (others.length) {
        write('player_info', {
          action: { add_player: true, update_game_mode: true, update_listed: true, update_latency: true },
          data: others.map(o => ({
            uuid: o.uuid,
            player: { name: o.username, properties: o.profileProperties || [] },
            gamemode: o.gameMode,
            listed: true,
            latency: 0
          }))
        })
      }
    }
    return updateAndSpawn.apply(this, args)
  }
}

module.exports = { server, player }
