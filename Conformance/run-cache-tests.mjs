// Runs the HTTP cache test suite (Conformance/cache-tests, http-tests/cache-tests as published,
// unchanged) in browser mode with every fetch() answered by Courier: the suite's own server on a
// free loopback port, the suite's own runner, and `CourierTestHelper cache-bridge` (one
// HTTPSessionManager on the .default configuration) in place of a browser's fetch().
//
//   node Conformance/run-cache-tests.mjs --bridge PATH [--suite DIR] [--json FILE] [--id TEST_ID]
//                                        [--check yes]
//
// Prints Courier's results beside the browsers' published ones and the tests Courier fails;
// --json writes the counts and every result. With --check yes, exits 1 unless Courier passes
// more tests than every browser and fails fewer required ones than every browser.

import { spawn } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath, pathToFileURL } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const options = { suite: path.join(here, 'cache-tests') }
for (let i = 2; i < process.argv.length; i += 2) {
  options[process.argv[i].replace(/^--/, '')] = process.argv[i + 1]
}
if (!options.bridge) {
  console.error('usage: run-cache-tests.mjs --bridge PATH [--suite DIR] [--json FILE] [--id TEST_ID]')
  process.exit(2)
}
const suite = path.resolve(options.suite)
const load = file => import(pathToFileURL(path.join(suite, file)).href)
const { runTests, getResults } = await load('test-engine/client/runner.mjs')
const { determineTestResult, resultTypes } = await load('test-engine/lib/results.mjs')
const allSuites = (await load('tests/index.mjs')).default

// MARK: The suite's server, on a free port

async function freePort () {
  return new Promise((resolve, reject) => {
    const probe = net.createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address()
      probe.close(() => resolve(port))
    })
  })
}

async function waitForPort (port, child) {
  for (let attempt = 0; attempt < 200; attempt++) {
    if (child.exitCode !== null) throw new Error(`the suite's server exited (${child.exitCode})`)
    const open = await new Promise(resolve => {
      const socket = net.connect(port, '127.0.0.1')
      socket.once('connect', () => { socket.destroy(); resolve(true) })
      socket.once('error', () => resolve(false))
    })
    if (open) return
    await new Promise(resolve => setTimeout(resolve, 50))
  }
  throw new Error(`the suite's server did not listen on ${port}`)
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'courier-cache-tests-'))
const port = await freePort()
const server = spawn(process.execPath, [path.join(suite, 'test-engine/server/server.mjs')], {
  env: {
    ...process.env,
    npm_config_protocol: 'http',
    npm_config_port: String(port),
    npm_config_pidfile: path.join(work, 'server.pid')
  },
  stdio: ['ignore', 'ignore', 'inherit']
})
await waitForPort(port, server)
const baseUrl = `http://127.0.0.1:${port}`

// MARK: fetch(), answered by Courier

const bridge = spawn(options.bridge, ['cache-bridge', path.join(work, 'storage')], {
  stdio: ['pipe', 'pipe', 'inherit']
})
const pending = new Map()
let nextId = 1
createInterface({ input: bridge.stdout }).on('line', line => {
  const answer = JSON.parse(line)
  const waiter = pending.get(answer.id)
  if (waiter === undefined) return
  pending.delete(answer.id)
  waiter(answer)
})
bridge.on('exit', code => {
  for (const waiter of pending.values()) waiter({ error: `the bridge exited (${code})` })
  pending.clear()
})

/** The part of a Fetch API Response the suite reads. */
function makeResponse (answer) {
  const headers = new Headers()
  for (const [name, value] of answer.headers) {
    try { headers.append(name, value) } catch { /* a value Fetch would not expose */ }
  }
  const body = Buffer.from(answer.body, 'base64').toString('utf8')
  return {
    status: answer.status,
    statusText: answer.statusText,
    ok: answer.status >= 200 && answer.status < 300,
    headers,
    text: async () => body
  }
}

globalThis.fetch = async function bridgedFetch (url, init = {}) {
  const id = nextId++
  const request = {
    id,
    method: init.method || 'GET',
    url: String(url),
    headers: (init.headers || []).map(([name, value]) => [String(name), String(value)]),
    body: init.body === undefined ? undefined : String(init.body),
    cache: init.cache,
    redirect: init.redirect
  }
  const answer = await new Promise((resolve, reject) => {
    pending.set(id, resolve)
    init.signal?.addEventListener('abort', () => {
      pending.delete(id)
      reject(new DOMException('The operation was aborted.', 'AbortError'))
    })
    bridge.stdin.write(JSON.stringify(request) + '\n')
  })
  if (answer.error !== undefined && answer.error !== null) throw new TypeError(`fetch failed: ${answer.error}`)
  return makeResponse(answer)
}

// MARK: The run

function browserTests () {
  const chosen = []
  for (const testSuite of allSuites) {
    for (const test of testSuite.tests) {
      if (test.cdn_only === true || test.browser_skip === true) continue
      if (options.id !== undefined && test.id !== options.id) continue
      chosen.push({ suite: testSuite, test })
    }
  }
  return chosen
}

const chosen = browserTests()
if (options.id !== undefined) chosen.forEach(({ test }) => { test.dump = true })
const started = Date.now()
const suitesToRun = allSuites.map(s => ({ ...s, tests: s.tests.filter(t => chosen.some(c => c.test === t)) }))
  .filter(s => s.tests.length > 0)
try {
  await runTests(suitesToRun, true, baseUrl)
} finally {
  bridge.stdin.end()
  server.kill()
}
const seconds = (Date.now() - started) / 1000
const results = getResults()

const columns = [
  ['pass', ['pass']],
  ['required failed', ['fail']],
  ['optimal failed', ['optional_fail']],
  ['check yes', ['yes']],
  ['check no', ['no']],
  ['setup, harness or dependency', ['setup_fail', 'harness_fail', 'dependency_fail', 'retry', 'untested']]
]
const kindOf = result => Object.keys(resultTypes).find(key => resultTypes[key] === result)

function tally (resultsById) {
  const counts = Object.fromEntries(columns.map(([name]) => [name, 0]))
  const byKind = {}
  for (const { test } of chosen) {
    const kind = kindOf(determineTestResult(allSuites, test.id, resultsById))
    byKind[test.id] = kind
    const column = columns.find(([, kinds]) => kinds.includes(kind))
    counts[column[0]] += 1
  }
  return { counts, byKind }
}

const rows = [['Courier', tally(results)]]
for (const browser of ['chrome', 'safari', 'firefox']) {
  const published = JSON.parse(fs.readFileSync(path.join(suite, 'results', `${browser}.json`), 'utf8'))
  rows.push([browser[0].toUpperCase() + browser.slice(1), tally(published)])
}

console.log(`HTTP cache test suite, browser mode, ${chosen.length} tests, ${seconds.toFixed(0)} s`)
console.log('')
console.log(`| client | ${columns.map(([name]) => name).join(' | ')} |`)
console.log(`| --- | ${columns.map(() => '---:').join(' | ')} |`)
for (const [name, { counts }] of rows) {
  console.log(`| ${name} | ${columns.map(([column]) => counts[column]).join(' | ')} |`)
}
const courier = rows[0][1]
const listed = kinds => chosen.filter(({ test }) => kinds.includes(courier.byKind[test.id]))
for (const [title, kinds] of [['Required tests Courier fails', ['fail']],
  ['Optimal tests Courier fails', ['optional_fail']],
  ['Setup, harness or dependency failures', columns[5][1]]]) {
  const failed = listed(kinds)
  if (failed.length === 0) continue
  console.log('')
  console.log(`${title}:`)
  for (const { test } of failed) {
    const detail = Array.isArray(results[test.id]) ? results[test.id].join(': ') : courier.byKind[test.id]
    console.log(`- ${test.id}: ${detail}`)
  }
}
if (options.json !== undefined) {
  fs.writeFileSync(options.json, JSON.stringify({
    seconds,
    counts: Object.fromEntries(rows.map(([name, { counts }]) => [name, counts])),
    results
  }, null, 2))
}
fs.rmSync(work, { recursive: true, force: true })
if (options.check === 'yes' && options.id === undefined) {
  const browsers = rows.slice(1).map(([, { counts }]) => counts)
  const mostPassed = Math.max(...browsers.map(c => c.pass))
  const fewestFailed = Math.min(...browsers.map(c => c['required failed']))
  const ours = courier.counts
  const met = ours.pass > mostPassed && ours['required failed'] < fewestFailed
  console.log('')
  console.log(`Targets: more than ${mostPassed} passed (${ours.pass}), fewer than ${fewestFailed} required failed ` +
    `(${ours['required failed']}): ${met ? 'met' : 'NOT MET'}`)
  if (!met) process.exitCode = 1
}
