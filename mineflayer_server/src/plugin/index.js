'use strict'
// The game-logic plugin for flying-squid 1.12.0 on Minecraft 1.21.4. Each module fills one gap
// of the stock server; together they expose `serv.gencoord`, the API the world and tests use.
//
// Options (flying-squid settings.plugins[path]): { cookTicks, recipes, pickupDelayMs, throwerDelayMs, log, operators, arenas },
// `recipes` being the recipes.json table of the rules directory (rules.js), `operators` the players a
// server standing in for an external one admits and obeys (none in the sidecar: admission.js, permissions.js),
// `arenas` the arenas' geometry, for who sees which entities (interest.js).

const modules = [
  require('./connections'),
  require('./admission'),
  require('./permissions'),
  require('./packetFixes'),
  require('./interest'),
  require('./inventory'),
  require('./containers'),
  require('./windows'),
  require('./crafting'),
  require('./furnace'),
  require('./drops'),
  require('./commands'),
  require('./edits'),
  require('./readback')
]

module.exports.server = function (serv) {
  const options = (this && this.settings) || {}
  const api = serv.gencoord = { log: options.log || ((scope, msg) => process.stderr.write(`[${scope}] ${msg}\n`)) }
  for (const m of modules) if (m.server) m.server(serv, api, options)
}

module.exports.player = function (player, serv) {
  for (const m of modules) if (m.player) m.player(player, serv, serv.gencoord)
}
