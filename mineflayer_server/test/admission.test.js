'use strict'
// Who can join and command the embedded server: only the bots its own process created, nobody is an
// operator, and no player command changes the world or the server. Strangers are real mineflayer
// clients on the same machine; one of them is a whole sidecar process whose bots the test tries to
// impersonate.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const mineflayer = require('mineflayer')
const { startArena, startSidecar, countOf, waitFor, SETTLE_MS } = require('./helpers')
const { connectBot, SPAWN_TIMEOUT_MS } = require('../src/bots')
const { MINECRAFT_VERSION } = require('../src/server')

let arena

before(async () => { arena = await startArena({ cookTicks: 2 }) })
after(async () => { await arena.close() })

const names = () => arena.serv.players.map(p => p.username).sort()

/** A mineflayer client that is not one of the server's bots: resolves to how its attempt ended. */
function stranger (username, port = arena.port) {
  const bot = mineflayer.createBot({ host: '127.0.0.1', port, username, auth: 'offline', version: MINECRAFT_VERSION, hideErrors: true, logErrors: false })
  return new Promise(resolve => {
    let kicked = null
    let spawned = false
    bot.on('error', () => {})
    // the client's own packet, not mineflayer's 'kicked', which a refusal can come before (bots.js)
    bot._client.on('disconnect', packet => { kicked = JSON.parse(packet.reason).text })
    bot.once('spawn', () => { spawned = true; bot.quit() })
    bot.once('end', () => resolve({ kicked, spawned }))
  })
}

test('a stranger\'s login is refused before it spawns, with the reason', async () => {
  const started = Date.now()
  const { kicked, spawned } = await stranger('stranger')
  assert.equal(spawned, false)
  assert.match(kicked, /^refused: this server admits only the bots its sidecar created; stranger connecting from 127\.0\.0\.1:\d+ is not one of them$/)
  // refused at login: well before a bot's spawn timeout (the margin is for a machine busy with other tests)
  assert.ok(Date.now() - started < SPAWN_TIMEOUT_MS / 2, `refused after ${Date.now() - started} ms`)
  assert.deepEqual(names(), ['agent_a', 'agent_b'])
  assert.ok(arena.lines.some(l => l.startsWith('[admission] refused "stranger": ')))
})

test('a stranger spoofing a connected bot\'s name is refused and the bot stays connected', async () => {
  const player = arena.player('agent_a')
  const { kicked, spawned } = await stranger('agent_a')
  assert.equal(spawned, false)
  assert.match(kicked, /agent_a connecting from 127\.0\.0\.1:\d+ is not one of them/)
  assert.equal(arena.player('agent_a'), player, 'the same player entity, not replaced by the newcomer')
  assert.ok(!arena.a.gcEnded && arena.a.entity)
  assert.deepEqual(arena.disconnects, [])
  assert.deepEqual(names(), ['agent_a', 'agent_b'])
})

test('a bot\'s /give, /kick, /stop, /op, /gamemode and /tp change neither world truth nor the server', async () => {
  await arena.world.reset({ agents: ['agent_a', 'agent_b'], stations: [], positions: { agent_a: [0, 0, 0], agent_b: [2, 0, 0] }, inventories: { agent_a: { oak_log: 2 } } })
  const truth = await arena.world.observe()
  const a = arena.player('agent_a')
  await waitFor(() => countOf(arena.a, 'oak_log') === 2, SETTLE_MS, 'A sees its logs')
  const replies = []
  arena.a.on('messagestr', m => replies.push(m))
  const position = a.position.clone()
  const commands = ['/give agent_a diamond 64', '/op agent_a', '/give agent_a diamond 64', '/kick agent_b', '/gamemode creative agent_a',
    '/tp agent_a 0 100 0', '/clear agent_a', '/stop']
  for (const c of commands) arena.a.chat(c)
  await arena.world.barrier() // `/sync` is the one command a player may send: every command above was handled
  await waitFor(() => replies.filter(m => / refused: players may send only \/sync on this server$/.test(m)).length === commands.length, SETTLE_MS,
    `a refusal for each command (got ${JSON.stringify(replies)})`)
  assert.deepEqual(await arena.world.observe(), truth)
  assert.deepEqual(truth.inventories, { agent_a: { oak_log: 2 }, agent_b: {} })
  assert.equal(countOf(arena.a, 'diamond'), 0)
  assert.ok(!a.op, 'nobody is an operator')
  assert.equal(a.gameMode, 0)
  assert.ok(a.position.distanceTo(position) < 0.01)
  assert.deepEqual(arena.disconnects, [], '/kick and /stop disconnected nobody')
  assert.deepEqual(names(), ['agent_a', 'agent_b'])
  for (const c of commands) assert.ok(arena.lines.includes(`[commands] refused agent_a: ${JSON.stringify(c)}`), c)
  assert.ok(!arena.lines.some(l => l.startsWith('[edit] give') || l.startsWith('[edit] clear')))
  // the server still serves its own bots' skills
  const [made] = await arena.world.execute(arena.world.checkCall({ id: 'c1', actor: 'agent_a', op: 'craft', args: { item: 'oak_planks', count: 4, station: '' } }))
  assert.equal(made.ok, true, made.reason)
  assert.deepEqual((await arena.world.observe()).inventories, { agent_a: { oak_log: 1, oak_planks: 4 }, agent_b: {} })
})

test('bots of another process cannot join a sidecar\'s server, even under its own bots\' names', async () => {
  const sc = await startSidecar(['--cook-ticks', '2'])
  try {
    const port = sc.ready.mc_port
    const started = Date.now()
    await assert.rejects(connectBot('a0_agent_a', port, () => {}),
      new RegExp(`^ProtocolError: the server at 127\\.0\\.0\\.1:${port} refused a0_agent_a: refused: this server admits only the bots its sidecar created; a0_agent_a connecting from 127\\.0\\.0\\.1:\\d+ is not one of them; check that it runs with online-mode=false`))
    assert.ok(Date.now() - started < SPAWN_TIMEOUT_MS / 2, `connectBot gave up after ${Date.now() - started} ms, not at its spawn timeout`)
    assert.equal((await stranger('someone', port)).spawned, false)
    assert.ok(sc.stderr.join('').includes('[admission] refused "a0_agent_a"'))

    // the sidecar's own episode is untouched
    assert.equal((await sc.call('open_arena', { arena: 'a0' })).ok, true)
    const reply = await sc.call('reset', {
      arena: 'a0',
      spec: { agents: ['agent_a', 'agent_b'], stations: [], positions: { agent_a: [0, 0, 0], agent_b: [2, 0, 0] }, inventories: { agent_a: { oak_log: 1 } } }
    })
    assert.equal(reply.ok, true, JSON.stringify(reply.error))
    assert.deepEqual(reply.result.rejoined, [])
    const run = await sc.call('execute', { arena: 'a0', call: { id: 'c1', actor: 'agent_a', op: 'craft', args: { item: 'oak_planks', count: 4, station: '' } } })
    assert.equal(run.result.events[0].ok, true, run.result.events[0].reason)
    assert.deepEqual((await sc.call('observe', { arena: 'a0' })).result.inventories, { agent_a: { oak_planks: 4 }, agent_b: {} })
  } finally {
    await sc.close()
  }
})
