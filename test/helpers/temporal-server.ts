/**
 * A private Temporal dev server for the service-restart tests: `./temporal-dev.sh` of this
 * checkout, started on free ports of its own, so it has its own persistent database
 * (`.temporal/dev-<port>.db`), pid file and log, and can be stopped and started again without
 * touching the shared server on 7233 that other test files use.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const script = join(root, 'temporal-dev.sh');
const stateDir = join(root, '.temporal');
const IP = '127.0.0.1';

/**
 * Why `temporal-dev.sh` cannot run a server here, or null when it can: it needs the Temporal
 * CLI on PATH, the one it installed before, or python3 to install it.
 */
export function temporalCliProblem(): string | null {
  const onPath = (name: string) =>
    (process.env['PATH'] ?? '').split(delimiter).some((dir) => dir && existsSync(join(dir, name)));
  if (onPath('temporal') || existsSync(join(stateDir, 'venv', 'turnkit-cli-path')) || onPath('python3'))
    return null;
  return 'neither the Temporal CLI nor python3 (to install it) is on PATH';
}

/**
 * A port nothing listens on, below the ephemeral range (32768–60999 on Linux) so that no
 * outgoing connection takes it while the server is down.
 */
export async function freePort(taken: number[] = []): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    if (taken.includes(port)) continue;
    const server = createServer();
    const free = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(port, IP, () => resolve(true));
    });
    if (free) {
      await new Promise((resolve) => server.close(resolve));
      return port;
    }
  }
}

/** Whether anything accepts TCP connections on the port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: IP, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Whether the process exists and is not a zombie waiting to be reaped. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true; // no /proc (not Linux): kill(0) is all there is
  }
}

export class PrivateTemporalServer {
  readonly address: string;
  readonly dbFile: string;
  readonly logFile: string;
  private readonly pidFile: string;
  private readonly env: NodeJS.ProcessEnv;
  /** Every pid this object started, for dispose(). */
  private readonly pids = new Set<number>();

  private constructor(
    readonly port: number,
    readonly uiPort: number,
  ) {
    this.address = `${IP}:${port}`;
    this.dbFile = join(stateDir, `dev-${port}.db`);
    this.logFile = join(stateDir, `server-${port}.log`);
    this.pidFile = join(stateDir, `server-${port}.pid`);
    this.env = { ...process.env, TEMPORAL_PORT: String(port), TEMPORAL_UI_PORT: String(uiPort) };
  }

  /** A server on two free ports (gRPC and Web UI); nothing is started yet. */
  static async onFreePorts(): Promise<PrivateTemporalServer> {
    const port = await freePort();
    return new PrivateTemporalServer(port, await freePort([port]));
  }

  /** The pid of the server process `temporal-dev.sh` started, from its pid file. */
  pid(): number | undefined {
    if (!existsSync(this.pidFile)) return undefined;
    const pid = Number(readFileSync(this.pidFile, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  }

  private async script(command: 'start' | 'stop'): Promise<string> {
    const { stdout, stderr } = await execFileAsync(script, [command], {
      cwd: root,
      env: this.env,
      timeout: 180_000,
    });
    return stdout + stderr;
  }

  /** `temporal-dev.sh start` on this port and database; returns once the server is healthy. */
  async start(): Promise<void> {
    const output = await this.script('start');
    const pid = this.pid();
    if (pid === undefined || !processAlive(pid))
      throw new Error(
        `temporal-dev.sh start did not start a server of its own on ${this.address}:\n${output}`,
      );
    // Last resort if the test process exits before dispose(): the server must not outlive it.
    if (this.pids.size === 0) process.once('exit', this.onExit);
    this.pids.add(pid);
  }

  /**
   * `temporal-dev.sh stop`, checked: the server process is gone and nothing listens on the port
   * any more (a real stop, not a server left running behind the script's back).
   */
  async stop(): Promise<void> {
    const pid = this.pid();
    if (pid === undefined) throw new Error(`no server of this checkout runs on ${this.address}`);
    const output = await this.script('stop');
    const until = Date.now() + 10_000;
    while (processAlive(pid) || (await listening(this.port))) {
      if (Date.now() > until)
        throw new Error(`the server on ${this.address} (pid ${pid}) is still up after stop:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Whether the pid is (still) a server on this database, not a reused pid. */
  private ours(pid: number): boolean {
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return args.some((arg) => arg.endsWith(`/.temporal/dev-${this.port}.db`));
    } catch {
      return false;
    }
  }

  private kill(pid: number): void {
    try {
      if (this.ours(pid)) process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }

  /** The end of the server log, for failure messages. */
  logTail(lines = 30): string {
    if (!existsSync(this.logFile)) return '(no server log)';
    return readFileSync(this.logFile, 'utf8').split('\n').slice(-lines).join('\n');
  }

  /** Stops the server whatever state it is in (SIGKILL if need be) and deletes its files. */
  async dispose(): Promise<void> {
    await this.script('stop').catch(() => undefined);
    this.killAndRemove();
    process.off('exit', this.onExit);
    this.pids.clear();
  }

  private readonly onExit = () => this.killAndRemove();

  private killAndRemove(): void {
    for (const pid of this.pids) this.kill(pid);
    const files = [
      this.logFile,
      `${this.logFile}.prev`,
      this.pidFile,
      join(stateDir, `server-${this.port}.lock`),
    ];
    for (const suffix of ['', '-wal', '-shm', '-journal']) files.push(`${this.dbFile}${suffix}`);
    for (const file of files) rmSync(file, { force: true });
  }
}
