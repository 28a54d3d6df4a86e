// HTTP server for the programs tier: GET /file streams FILE, POST /upload
// answers the sha256 of the body, POST /echo pipes the body back.  With
// CLUSTER=N the primary forks N workers and (round-robin scheduling, the
// Linux default) accepts connections itself and hands them to the workers.
// Prints "listening" once ready.  Usage: node node_server.js PORT FILE
const http = require('http'), fs = require('fs'), crypto = require('crypto');
const cluster = require('cluster');
const [port, file] = process.argv.slice(2);
const n = parseInt(process.env.CLUSTER || '0', 10);
if (n > 0 && cluster.isPrimary) {
  cluster.schedulingPolicy = cluster.SCHED_RR;
  let up = 0;
  for (let i = 0; i < n; i++) cluster.fork();
  cluster.on('listening', () => { if (++up === n) console.log('listening'); });
  process.on('SIGTERM', () => { for (const id in cluster.workers) cluster.workers[id].kill(); process.exit(0); });
} else {
  http.createServer((req, res) => {
    if (req.url === '/file') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      fs.createReadStream(file).pipe(res);
    } else if (req.url === '/upload') {
      const h = crypto.createHash('sha256');
      req.on('data', (d) => h.update(d));
      req.on('end', () => { res.end(h.digest('hex') + '\n'); });
    } else if (req.url === '/echo') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      req.pipe(res);
    } else { res.writeHead(404); res.end(); }
  }).listen(+port, '127.0.0.1', () => { if (!n) console.log('listening'); });
}
