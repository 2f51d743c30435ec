'use strict'
// Packet fixes that make flying-squid 1.12.0 speak valid Minecraft 1.21.4 to mineflayer clients.
// Without them a teleport (or any move of more than a few blocks) disconnects every other client,
// players appear as boats, and a player who joins second never learns about the first.

function player (player, serv) {
  const registry = serv.registry
  const modern = registry.version['>=']('1.21.2')
  const playerType = registry.entitiesByName.player.id
  const write = player._client.write.bind(player._client)

  player._client.write = function (name, params) {
    if (modern && name === 'entity_teleport') {
      // 1.21.2 added a velocity delta and relative-flags to entity_teleport; flying-squid omits them
      // and the serializer error kills the receiving connection.
      params = { dx: 0, dy: 0, dz: 0, flags: { _value: 0 }, ...params }
    }
    // flying-squid's sound_effect layout predates 1.21; clients log "partial packet" errors. Sounds are cosmetic.
    if (modern && name === 'sound_effect') return
    // Players are spawned through the unified spawn_entity packet with type null (id 0 = a boat on 1.21.4).
    if (name === 'spawn_entity' && serv.entities[params.entityId]?.type === 'player') {
      params = { ...params, type: playerType }
    }
    return write(name, params)
  }

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

module.exports = { player }
