/**
 * A typed HTTP client with retries, timeouts and simple response caching.
 */
import { EventEmitter } from "events";

export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface RequestOptions<TBody = unknown> {
  method?: HttpMethod;
  headers?: Record<string, string>;
  body?: TBody;
  timeoutMs?: number;
  retries?: number;
  cacheTtlMs?: number;
}

export interface ApiResponse<T> {
  status: number;
  data: T;
  fromCache: boolean;
}

export class HttpError extends Error {
  constructor(public readonly status: number, message: string, public readonly body?: string) {
    super(message);
    this.name = "HttpError";
  }
}

enum RetryPolicy {
  Never,
  Idempotent,
  Always,
}

type CacheEntry = { expires: number; value: ApiResponse<unknown> };

const IDEMPOTENT: ReadonlySet<HttpMethod> = new Set(["GET", "PUT", "DELETE"]);

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Exponential backoff with a little jitter, capped at eight seconds. */
export function backoff(attempt: number, baseMs = 250): number {
  const jitter = Math.random() * baseMs;
  return Math.min(8_000, baseMs * 2 ** attempt + jitter);
}

export class ApiClient extends EventEmitter {
  private readonly cache = new Map<string, CacheEntry>();
  private policy: RetryPolicy = RetryPolicy.Idempotent;

  constructor(private readonly baseUrl: string, private token?: string) {
    super();
    if (!baseUrl.startsWith("http")) {
      throw new TypeError(`baseUrl must be absolute, got '${baseUrl}'`);
    }
  }

  setToken(token: string | undefined): void {
    this.token = token;
  }

  setRetryPolicy(policy: RetryPolicy): this {
    this.policy = policy;
    return this;
  }

  private shouldRetry(method: HttpMethod, status: number): boolean {
    if (status < 500 && status !== 429) return false;
    switch (this.policy) {
      case RetryPolicy.Never:
        return false;
      case RetryPolicy.Always:
        return true;
      default:
        return IDEMPOTENT.has(method);
    }
  }

  async request<T, B = unknown>(path: string, opts: RequestOptions<B> = {}): Promise<ApiResponse<T>> {
    const { method = "GET", retries = 2, timeoutMs = 10_000, cacheTtlMs = 0 } = opts;
    const url = new URL(path, this.baseUrl).toString();
    const cacheKey = `${method} ${url}`;

    const cached = this.cache.get(cacheKey);
    if (method === "GET" && cached && cached.expires > Date.now()) {
      return { ...(cached.value as ApiResponse<T>), fromCache: true };
    }

    const headers: Record<string, string> = {
      Accept: "application/json",
      ...(opts.body !== undefined ? { "Content-Type": "application/json" } : {}),
      ...(this.token ? { Authorization: `Bearer ${this.token}` } : {}),
      ...opts.headers,
    };

    for (let attempt = 0; ; attempt++) {
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(), timeoutMs);
      try {
        const res = await fetch(url, {
          method,
          headers,
          body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
          signal: controller.signal,
        });
        if (!res.ok) {
          const text = await res.text();
          if (attempt < retries && this.shouldRetry(method, res.status)) {
            this.emit("retry", { url, attempt, status: res.status });
            await sleep(backoff(attempt));
            continue;
          }
          throw new HttpError(res.status, `${method} ${path} failed`, text);
        }
        const data = (await res.json()) as T;
        const result: ApiResponse<T> = { status: res.status, data, fromCache: false };
        if (method === "GET" && cacheTtlMs > 0) {
          this.cache.set(cacheKey, { expires: Date.now() + cacheTtlMs, value: result });
        }
        return result;
      } finally {
        clearTimeout(timer);
      }
    }
  }

  get<T>(path: string, opts?: Omit<RequestOptions, "method" | "body">) {
    return this.request<T>(path, { ...opts, method: "GET" });
  }

  post<T, B>(path: string, body: B, opts?: Omit<RequestOptions<B>, "method" | "body">) {
    return this.request<T, B>(path, { ...opts, method: "POST", body });
  }

  clearCache(prefix?: string): number {
    let removed = 0;
    for (const key of [...this.cache.keys()]) {
      if (!prefix || key.includes(prefix)) {
        this.cache.delete(key);
        removed++;
      }
    }
    return removed;
  }
}

// Example domain types used by the dashboard.
export interface User {
  id: number;
  name: string;
  email?: string;
  roles: Array<"admin" | "editor" | "viewer">;
}

export async function fetchAdmins(client: ApiClient): Promise<User[]> {
  const { data } = await client.get<User[]>("/users", { cacheTtlMs: 60_000 });
  return data.filter((u): u is User => u.roles.includes("admin"));
}
