'use strict'
// Who may join: only the bots this process created, each under the name its connection was opened for
// (../botSockets.js says how a connection is recognised as ours). Everyone else is refused at login,
// before a player, a uuid or a player slot exists, with a reason the client is shown.
//
// `operators` (startServer's option, empty in the sidecar) names players admitted from any local
// client: only a server standing in for an external one in tests has them, as a vanilla server admits
// the players of its ops.json.

const { botOn } = require('../botSockets')

/** Why the login of `username` over `client` is refused, or null when it is admitted. */
function refusal (client, username, operators) {
  if (operators.has(username)) return null
  const own = botOn(client.socket)
  if (own === username) return null
  if (own !== null) return `this connection was opened for the bot ${own}, not for ${username}`
  const from = `${client.socket.remoteAddress}:${client.socket.remotePort}`
  return `this server admits only the bots its sidecar created; ${username} connecting from ${from} is not one of them`
}

function server (serv, api, options) {
  const operators = new Set(options.operators || [])
  serv._server.on('connection', client => {
    // minecraft-protocol's own login handler (registered before this listener) would accept any name in
    // offline mode; it runs only for an admitted client, so a refused one never gets a player.
    const login = client.rawListeners('login_start')
    client.removeAllListeners('login_start')
    client.once('login_start', (packet, meta) => {
      const why = refusal(client, packet.username, operators)
      if (why) {
        api.log('admission', `refused ${JSON.stringify(packet.username)}: ${why}`)
        client.end(`refused: ${why}`)
        return
      }
      for (const listener of login) listener.call(client, packet, meta)
    })
  })
}

module.exports = { server, refusal }
