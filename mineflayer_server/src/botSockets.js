'use strict'
// The TCP connections this process opened for its own bots, each with the username it logs in as.
//
// The embedded server admits a login only over one of these connections (plugin/admission.js). Our bots
// are created in this process, so the server can recognise them by their socket rather than by a name,
// which anyone can type on an offline-mode server. A TCP connection is named by its two ends: while our
// bot's socket is open, the kernel gives no other socket the same (local address, local port) towards
// the same server address and port, so an incoming connection whose remote end is one of ours comes from
// our own client, whoever else runs programs on this machine. An entry lives exactly as long as its socket.

const net = require('net')
const { batchWrites } = require('./batchWrites')

const opened = new Map() // "client address:port>server address:port" -> username

const key = (clientAddress, clientPort, serverAddress, serverPort) => `${clientAddress}:${clientPort}>${serverAddress}:${serverPort}`

/**
 * Open a TCP connection to `host:port` for the bot `username` and remember it while it is open.
 * The entry is in place before the socket's own `connect` listeners run, so before any packet is sent.
 */
function connectBotSocket ({ host, port, username }) {
  const socket = batchWrites(net.connect({ host, port }))
  socket.once('connect', () => {
    const k = key(socket.localAddress, socket.localPort, socket.remoteAddress, socket.remotePort)
    opened.set(k, username)
    socket.once('close', () => opened.delete(k))
  })
  return socket
}

/**
 * The username our bot connected for, when the server side `socket` of a connection is the other end of
 * one of our bots' sockets; null for any other client.
 */
function botOn (socket) {
  if (!socket || !socket.remoteAddress) return null
  return opened.get(key(socket.remoteAddress, socket.remotePort, socket.localAddress, socket.localPort)) ?? null
}

module.exports = { connectBotSocket, botOn }
