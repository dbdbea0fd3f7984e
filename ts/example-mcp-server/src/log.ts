// A small structured logger to stderr (one JSON object a line). Callers pass
// only secret-free fields: ids, codes, statuses — never a key or a token.
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
}

export function stderrLogger(): Logger {
  const write = (level: string, msg: string, fields?: Record<string, unknown>) => {
    process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields }) + "\n");
  };
  return { info: (m, f) => write("INFO", m, f), warn: (m, f) => write("WARN", m, f) };
}
