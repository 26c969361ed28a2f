// bullmq_burst.js: BullMQ's side of bench/peers (run by run_peers.py, one round per run):
// N delayed jobs all due at one instant, on the redis-server the driver started.
//
//   node bullmq_burst.js --port P --n N --out FILE [--concurrency C] [--lead-ms MS]
//                        [--add-timeout-ms MS] [--wait-ms MS]
//
// 1. A Worker (concurrency C, default 100: async no-op processor) is started on an empty
//    queue before anything is added, as keywatch's engine is started before tracking.
// 2. add: N jobs with Queue.addBulk in chunks of 1000, every job with timestamp T and delay
//    D so that T + D is the same deadline for all; the deadline is placed after the adding
//    ends (estimated from a 2000-job sample added first to another queue after a warm-up
//    of 10, x 1.25, plus --lead-ms). add rate = N / time addBulk took.
// 3. burst: each job's processor start minus the deadline (wall clock, sub-ms) is its
//    lateness; "all started by" is the largest; drain rate = N / (last start - first start);
//    "completed by" is when the Worker's last `completed` event fired.
// Jobs: removeOnComplete and removeOnFail, so Redis does not keep 100k finished jobs.
// Bounded: adding stops at --add-timeout-ms (default 120000), waiting for the jobs at
// deadline + --wait-ms (default 120000); a job not started by then is missing (the driver
// counts it infinitely late) and "timed_out" says which phase ran out.
// Output: one JSON line appended to FILE, the same shape kw_bench_queue --lateness-out
// writes: {"variant": "bullmq", "n", "deadline_ms", "add_s", "acked_by_ms" (completed by),
// "late_ms": [...], "concurrency", "timed_out", "bullmq", "ioredis"}.
'use strict';

const fs = require('node:fs');
const { performance } = require('node:perf_hooks');

let bullmq;
try {
  bullmq = require('bullmq');
} catch (e) {
  console.error('bullmq_burst.js: BullMQ is not installed: run `npm ci` in bench/peers (' + e.message + ')');
  process.exit(2);
}
const { Queue, Worker } = bullmq;

function parseArgs(argv) {
  const o = { port: 0, n: 100000, out: '', concurrency: 100, leadMs: 3000,
              addTimeoutMs: 120000, waitMs: 120000 };
  const names = { '--port': 'port', '--n': 'n', '--out': 'out', '--concurrency': 'concurrency',
                  '--lead-ms': 'leadMs', '--add-timeout-ms': 'addTimeoutMs', '--wait-ms': 'waitMs' };
  for (let i = 2; i < argv.length; i += 2) {
    const key = names[argv[i]];
    if (!key || i + 1 >= argv.length) throw new Error(`bad option ${argv[i]} (see the header)`);
    o[key] = key === 'out' ? argv[i + 1] : Number(argv[i + 1]);
    if (key !== 'out' && !(Number.isInteger(o[key]) && o[key] >= 0))
      throw new Error(`bad value '${argv[i + 1]}' for ${argv[i]}`);
  }
  if (!o.port || !o.out || o.n < 1 || o.concurrency < 1)
    throw new Error('--port, --out, --n >= 1 and --concurrency >= 1 are needed');
  return o;
}

// Wall clock in ms with sub-ms resolution (comparable with keywatch's and Redis's clock).
const wallMs = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Adds jobs [0, n) due at `deadline` in chunks of 1000; stops at `stopAt` (wall ms).
async function addJobs(queue, n, deadline, stopAt) {
  const chunk = 1000;
  let added = 0;
  while (added < n && wallMs() < stopAt) {
    const now = Date.now();
    const jobs = [];
    for (let i = added; i < Math.min(n, added + chunk); i++)
      jobs.push({ name: 'j', data: { i }, opts: { timestamp: now, delay: Math.max(deadline - now, 0),
                                                  removeOnComplete: true, removeOnFail: true } });
    await queue.addBulk(jobs);
    added += jobs.length;
  }
  return added;
}

async function main() {
  const o = parseArgs(process.argv);
  const connection = { host: '127.0.0.1', port: o.port, maxRetriesPerRequest: null };

  // The sample that estimates the time adding takes, on a queue no worker serves.
  const cal = new Queue('peers-cal', { connection });
  await addJobs(cal, 10, Date.now() + 3600000, Infinity);  // connected, scripts loaded
  const sample = Math.min(o.n, 2000);
  let t = wallMs();
  await addJobs(cal, sample, Date.now() + 3600000, Infinity);
  const estMs = ((wallMs() - t) * o.n) / sample;
  await cal.obliterate({ force: true });
  await cal.close();

  const queue = new Queue('peers', { connection });
  const late = [];
  let deadline = 0, lastCompleted = 0, completed = 0;
  const worker = new Worker('peers', async () => { late.push(wallMs() - deadline); },
                            { connection, concurrency: o.concurrency });
  worker.on('completed', () => { completed++; lastCompleted = wallMs(); });
  worker.on('error', (e) => console.error('bullmq worker error:', e.message));
  await worker.waitUntilReady();

  deadline = Math.round(Date.now() + estMs * 1.25 + o.leadMs + 100);
  t = wallMs();
  const added = await addJobs(queue, o.n, deadline, t + o.addTimeoutMs);
  const addS = (wallMs() - t) / 1000;
  const timedOut = [];
  if (added < o.n) timedOut.push('add');
  const gapMs = deadline - wallMs();

  const until = deadline + o.waitMs;
  while ((late.length < added || completed < added) && wallMs() < until) await sleep(20);
  if (late.length < o.n || completed < o.n) timedOut.push('burst');
  const ackedBy = completed >= o.n ? lastCompleted - deadline : null;
  await worker.close(true);
  await queue.obliterate({ force: true }).catch(() => {});
  await queue.close();

  const line = { variant: 'bullmq', n: o.n, deadline_ms: deadline, add_s: addS, acked_by_ms: ackedBy,
                 late_ms: late.map((x) => Math.round(x * 1000) / 1000), concurrency: o.concurrency,
                 timed_out: timedOut, added, gap_ms: gapMs,
                 bullmq: require('bullmq/package.json').version,
                 ioredis: require('ioredis/package.json').version };
  fs.appendFileSync(o.out, JSON.stringify(line) + '\n');
  const max = late.length ? late.reduce((a, b) => Math.max(a, b), -Infinity) : NaN;
  console.log(`    bullmq:   ${added} jobs added in ${addS.toFixed(1)} s, deadline ${(gapMs / 1000).toFixed(1)} s ` +
              `after; started ${late.length}/${o.n}, last start +${max.toFixed(0)} ms, completed by ` +
              `${ackedBy === null ? 'n/a' : '+' + ackedBy.toFixed(0) + ' ms'}` +
              (timedOut.length ? `; TIMED OUT: ${timedOut.join(', ')}` : ''));
}

main().then(() => process.exit(0), (e) => {
  console.error('bullmq_burst.js: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
