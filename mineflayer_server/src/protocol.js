'use strict'
// The sidecar wire protocol: one msgpack map per message.
//   request  {v, id, op, args}
//   reply    {v, id, ok: true, result} | {v, id, ok: false, error: {type, message}}
// This module is the only place that turns bytes into requests and replies into bytes.

const { encode, decode } = require('@msgpack/msgpack')

const PROTOCOL_VERSION = 2
/**
 * The Minecraft server the bots join failed them before they spawned (bots.js): it could not be reached, refused
 * the login (`ServerRefused`, with its reason), speaks another Minecraft version, or let a bot connect but never
 * spawned it in time (`ServerTimeout`). The sidecar and its other arenas are fine; the server needs fixing.
 */
const SERVER_FAULTS = Object.freeze(['ServerUnreachable', 'ServerRefused', 'ServerVersionMismatch', 'ServerTimeout'])
/**
 * `ArenaFault`: the arena named in the request lost its episode (a bot disconnected, the reset or the
 * read-back failed); the next reset of that arena rebuilds it. `ArenaBusy`: the arena asked for is held
 * by another client, or no more arenas may be opened. `Stalled`: the sidecar stalled (stopped, paused or
 * starved) during the arena's episode, whose skills run on wall-clock budgets: the episode is lost, for the
 * machine's sake, not the agents'.
 */
const ERROR_TYPES = Object.freeze(['BadRequest', 'TooLarge', 'VersionMismatch', 'SkillFailed', 'ArenaFault', 'ArenaBusy', 'Stalled', 'Internal', ...SERVER_FAULTS])

/** A request the sidecar refuses; `type` is one of ERROR_TYPES and travels to the client. */
class ProtocolError extends Error {
  constructor (type, message) {
    super(message)
    if (!ERROR_TYPES.includes(type)) throw new Error(`unknown protocol error type ${type}`)
    this.name = 'ProtocolError'
    this.type = type
  }
}

const badRequest = message => new ProtocolError('BadRequest', message)
/** A request over a limit of limits.json (a reset spec over `spec.*`): refused before any work. */
const tooLarge = message => new ProtocolError('TooLarge', message)

/** The limit names each wire section of limits.json must hold (the Python side reads the same). */
const WIRE_LIMITS = Object.freeze({ transport: ['message_bytes'], spec: ['stations', 'site_cells', 'item_kinds'], arena: ['reach', 'height'] })

/**
 * The limits of limits.json's `transport`, `spec` and `arena` sections (`rules.limits`, as rules.js read it):
 * `{transport: {message_bytes}, spec: {stations, site_cells, item_kinds}, arena: {reach, height}}`, each its
 * max, and `ranges` the same names' `{min, max}`. Throws naming the entry to fix.
 */
function wireLimits (limits) {
  const out = {}
  const ranges = {}
  for (const [section, names] of Object.entries(WIRE_LIMITS)) {
    out[section] = {}
    ranges[section] = {}
    for (const name of names) {
      const l = limits && limits[section] && limits[section][name]
      if (!l || !Number.isInteger(l.min) || !Number.isInteger(l.max) || l.min < 0 || l.min > l.max) {
        throw new Error(`limits.json: ${section}.${name} needs {min, max} integers with 0 <= min <= max, got ${JSON.stringify(l)}`)
      }
      out[section][name] = l.max
      ranges[section][name] = Object.freeze({ min: l.min, max: l.max })
    }
    Object.freeze(out[section])
  }
  out.ranges = ranges
  return Object.freeze(out)
}
const isMap = v => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Uint8Array)

/**
 * Decode and check one request. Returns `{id, op, args}`; throws ProtocolError whose `id` is set when the
 * request id could be read, so the reply can still be matched by the client. `maxBytes`: the socket drops a
 * larger message before it gets here (socket.js); this check only guards a socket opened without the cap.
 */
function decodeRequest (payload, maxBytes) {
  if (!Number.isInteger(maxBytes)) throw new Error('decodeRequest needs the message cap (limits.json transport.message_bytes)')
  if (payload.length > maxBytes) {
    throw new ProtocolError('TooLarge', `message of ${payload.length} bytes exceeds the ${maxBytes}-byte cap; send less per request`)
  }
  let msg
  try {
    msg = decode(payload)
  } catch (err) {
    throw badRequest(`message is not valid msgpack: ${err.message}`)
  }
  if (!isMap(msg)) throw badRequest('message must be a msgpack map {v, id, op, args}')
  const id = Number.isSafeInteger(msg.id) ? msg.id : null
  const fail = err => { err.id = id; return err }
  if (msg.v !== PROTOCOL_VERSION) {
    throw fail(new ProtocolError('VersionMismatch',
      `request uses protocol v=${JSON.stringify(msg.v)} but this sidecar speaks v=${PROTOCOL_VERSION}; install the matching gencoord_env and mineflayer_server versions`))
  }
  if (id === null) throw fail(badRequest('field "id" must be an integer'))
  if (typeof msg.op !== 'string' || !msg.op) throw fail(badRequest('field "op" must be a non-empty string'))
  const args = msg.args === undefined || msg.args === null ? {} : msg.args
  if (!isMap(args)) throw fail(badRequest('field "args" must be a map'))
  return { id, op: msg.op, args }
}

function encodeResult (id, result) {
  return encode({ v: PROTOCOL_VERSION, id, ok: true, result: result === undefined ? null : result })
}

function encodeError (id, type, message) {
  return encode({ v: PROTOCOL_VERSION, id: id ?? null, ok: false, error: { type, message } })
}

module.exports = {
  PROTOCOL_VERSION,
  ERROR_TYPES,
  SERVER_FAULTS,
  WIRE_LIMITS,
  ProtocolError,
  badRequest,
  tooLarge,
  wireLimits,
  isMap,
  decodeRequest,
  encodeResult,
  encodeError
}
