'use strict'
// minecraft-data's `require('minecraft-data')(version)` returns its cached data for a version, but first
// builds a Version object by walking every known version, and prismarine-physics asks for it on every
// physics tick of every bot (its PlayerState): 3 % of the sidecar's busy time at 8 arenas. Every caller
// requires the module at call time, so replacing its exports with one that remembers each version's
// answer (the very same object minecraft-data would return) serves them all.

function rememberVersions () {
  const path = require.resolve('minecraft-data')
  const original = require(path)
  if (original.gcRemembers) return
  const known = new Map()
  const remembering = function (version, preNetty) {
    const key = `${version}|${Boolean(preNetty)}`
    if (!known.has(key)) known.set(key, original(version, preNetty))
    return known.get(key)
  }
  Object.assign(remembering, original, { gcRemembers: true })
  require.cache[path].exports = remembering
}

module.exports = { rememberVersions }
