'use strict'
// The sidecar's one ROUTER socket and who may talk to it.
//
// - Size: the message cap (limits.json, transport.message_bytes) is set on the socket itself
//   (ZMQ_MAXMSGSIZE): libzmq drops a larger message while receiving it, before it is allocated whole, and
//   closes that peer's connection. Nothing over the cap ever reaches JavaScript.
// - tcp (loopback only): CURVE. This process makes its key pair at start and reports the public key in
//   READY; a ZAP handler admits only the one client public key given on the command line (`--client-key`,
//   the Python side's per-launch key pair). A peer without that key never completes the handshake, so it
//   can send nothing, and the client knows it talks to this process (only it holds the secret key).
// - ipc: the socket file must lie in a folder only this user may enter (the Python side makes a 0700
//   folder per launch); a folder others can enter is refused.
// - Arenas belong to the connection that opened them, known by its ZeroMQ routing id (arenaPool.js).

const crypto = require('crypto')
const fs = require('fs')
const path = require('path')
const zmq = require('zeromq')

/** Where libzmq asks for authentication (RFC 27/ZAP); a ZAP handler binds it in the same context. */
const ZAP_ENDPOINT = 'inproc://zeromq.zap.01'
const ZAP_DOMAIN = 'gencoord'
/**
 * Bytes the socket allows above the cap: on tcp the cap applies to the encrypted CURVE frame, which is 33
 * bytes longer than the message. A message between the cap and this is still refused, as TooLarge, by
 * protocol.js, so the client learns why.
 */
const FRAME_SLACK = 64

/** A CURVE public key as 64 hex digits (how `--client-key` takes it) -> 32 bytes; throws saying what is expected. */
function parseClientKey (hex) {
  if (typeof hex !== 'string' || !/^[0-9a-f]{64}$/i.test(hex)) {
    throw new Error('--client-key must be a CURVE public key as 64 hex digits (the Python side makes one per launch)')
  }
  return Buffer.from(hex, 'hex')
}

/** Refuse an ipc endpoint whose folder others may enter: the folder is all that guards an ipc socket. */
function checkIpcFolder (endpoint) {
  const dir = path.dirname(endpoint.slice('ipc://'.length))
  let st
  try {
    st = fs.statSync(dir)
  } catch (err) {
    throw new Error(`ipc endpoint ${endpoint}: its folder ${dir} cannot be read (${err.code || err.message})`)
  }
  if (process.platform !== 'win32' && (st.mode & 0o077) !== 0) {
    throw new Error(`ipc endpoint ${endpoint}: its folder ${dir} has mode ${(st.mode & 0o777).toString(8)}; ` +
      'other users could connect: use a folder only you may enter (mode 0700)')
  }
}

/** Answer ZAP requests: CURVE with exactly `allowed` (32 bytes) passes, anything else is refused and logged. */
async function startZap (allowed, log) {
  const zap = new zmq.Reply()
  await zap.bind(ZAP_ENDPOINT)
  ;(async () => {
    for await (const frames of zap) {
      // version, request id, domain, address, identity, mechanism, credentials...
      const [version, requestId, , address, , mechanism, key] = frames
      const ok = String(mechanism) === 'CURVE' && key !== undefined && key.length === allowed.length &&
        crypto.timingSafeEqual(key, allowed)
      if (!ok) log('socket', `refused a ${String(mechanism)} connection from ${String(address)}: not the client key this sidecar was started for`)
      await zap.send([version, requestId, ok ? '200' : '400', ok ? 'OK' : 'unknown client key', '', ''])
    }
  })().catch(err => { if (!zap.closed) log('socket', `ZAP handler stopped: ${err && err.message}`) })
  return zap
}

/**
 * Bind the ROUTER. Resolves to `{sock, endpoint, serverKey, close()}`; `serverKey` is the CURVE public key
 * (z85) on tcp, else null.
 */
async function bindSocket ({ endpoint, maxBytes, clientKey, log }) {
  // handover: a client that reconnects under its routing id (the Python client's Lazy Pirate resend) takes
  // over the old connection's place, and so keeps the arenas it opened (arenaPool.js binds them to that id)
  const options = { maxMessageSize: maxBytes + FRAME_SLACK, handover: true }
  let zap = null
  let serverKey = null
  if (endpoint.startsWith('tcp://')) {
    if (!clientKey) throw new Error('a tcp endpoint needs --client-key: the sidecar admits only the client holding that key')
    const allowed = parseClientKey(clientKey)
    const keys = zmq.curveKeyPair()
    zap = await startZap(allowed, log)
    Object.assign(options, {
      curveServer: true, curveSecretKey: keys.secretKey, curvePublicKey: keys.publicKey, zapDomain: ZAP_DOMAIN, zapEnforceDomain: true
    })
    serverKey = keys.publicKey
  } else {
    checkIpcFolder(endpoint)
  }
  const sock = new zmq.Router(options)
  try {
    await sock.bind(endpoint)
  } catch (err) {
    sock.close()
    if (zap) zap.close()
    throw err
  }
  return {
    sock,
    endpoint: sock.lastEndpoint,
    serverKey,
    close () { sock.close(); if (zap) zap.close() }
  }
}

module.exports = { bindSocket, parseClientKey, checkIpcFolder, FRAME_SLACK, ZAP_ENDPOINT }
