'use strict'
// What a player may command: nothing that changes the world or the server. Nobody is an operator, and
// every edit the game logic makes (give, clear, teleport, set blocks and containers) is a direct call of
// this plugin's API (serv.gencoord), never a chat command. A player's command is run only when it is in
// PLAYER_COMMANDS; any other (/give, /kick, /stop, /op, /gamemode, /tp, ...) is refused, whether or
// not flying-squid marks it as an operator command. The server's own console is not a player and is
// not affected.
//
// `operators` (startServer's option, empty in the sidecar) may run every command, as on vanilla: only a
// server standing in for an external one in tests has them, because an external arena resets by
// operator commands (arenas/external.js).

/** Commands any player may send; none changes anything. `sync` is the ordering barrier (commands.js). */
const PLAYER_COMMANDS = Object.freeze(['sync'])

function server (serv, api, options) {
  const operators = new Set(options.operators || [])
  const allowed = new Set(PLAYER_COMMANDS)
  // Every player command goes through serv.commands.use (flying-squid's player.handleCommand), with
  // the player's op flag as its last argument; the permission is decided here instead.
  const use = serv.commands.use.bind(serv.commands)
  serv.commands.use = async (command, ctx = {}, op = true) => {
    const player = ctx.player
    if (!player) return use(command, ctx, op)
    if (operators.has(player.username)) return use(command, ctx, true)
    const name = String(command).split(' ')[0]
    if (allowed.has(name)) return use(command, ctx, false)
    api.log('commands', `refused ${player.username}: ${JSON.stringify('/' + command)}`)
    return `/${name} refused: players may send only ${PLAYER_COMMANDS.map(c => '/' + c).join(', ')} on this server`
  }
}

module.exports = { server, PLAYER_COMMANDS }
