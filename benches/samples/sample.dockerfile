# syntax=docker/dockerfile:1.6
#
# Multi-stage build for the API server.
#   docker build -t api:latest --build-arg APP_VERSION=$(git describe) .

ARG NODE_VERSION=20.12
ARG ALPINE_VERSION=3.19

# ---------------------------------------------------------------------------
# Stage 1: install dependencies (cached separately from the source)
FROM node:${NODE_VERSION}-alpine${ALPINE_VERSION} AS deps
WORKDIR /app
RUN apk add --no-cache libc6-compat python3 make g++
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm \
    npm ci --ignore-scripts --no-audit --no-fund

# ---------------------------------------------------------------------------
# Stage 2: compile TypeScript and prune dev dependencies
FROM deps AS build
ARG APP_VERSION=dev
ENV NODE_ENV=production \
    APP_VERSION=${APP_VERSION}
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY prisma ./prisma
RUN npx prisma generate \
    && npm run build \
    && npm prune --omit=dev \
    && rm -rf src tsconfig*.json

# ---------------------------------------------------------------------------
# Stage 3: run the tests against the compiled output (skipped in CI cache)
FROM build AS test
ENV NODE_ENV=test
COPY test ./test
RUN npm ci --ignore-scripts && npm test -- --reporter=dot

# ---------------------------------------------------------------------------
# Stage 4: minimal runtime image
FROM node:${NODE_VERSION}-alpine${ALPINE_VERSION} AS runtime

LABEL org.opencontainers.image.title="api" \
      org.opencontainers.image.description="Public REST API" \
      org.opencontainers.image.source="https://github.com/example/api" \
      org.opencontainers.image.licenses="MIT"

RUN apk add --no-cache tini curl \
    && addgroup -S -g 10001 app \
    && adduser -S -u 10001 -G app -h /app app

WORKDIR /app
ENV NODE_ENV=production \
    PORT=8080 \
    NODE_OPTIONS="--enable-source-maps --max-old-space-size=384"

COPY --from=build --chown=app:app /app/node_modules ./node_modules
COPY --from=build --chown=app:app /app/dist ./dist
COPY --from=build --chown=app:app /app/prisma ./prisma
COPY --chown=app:app package.json ./
COPY --chmod=0755 docker/entrypoint.sh /usr/local/bin/entrypoint.sh

# Static assets are served by the CDN in production, but kept for local use.
ADD --chown=app:app public.tar.gz /app/public/

USER app:app
EXPOSE 8080/tcp
VOLUME ["/app/uploads"]

HEALTHCHECK --interval=30s --timeout=3s --start-period=20s --retries=3 \
    CMD curl -fsS "http://127.0.0.1:${PORT}/health" || exit 1

STOPSIGNAL SIGTERM
ENTRYPOINT ["/sbin/tini", "--", "/usr/local/bin/entrypoint.sh"]
CMD ["node", "dist/server.js"]

# ---------------------------------------------------------------------------
# Stage 5: development image with hot reload (docker compose uses this one)
FROM deps AS dev
ENV NODE_ENV=development \
    CHOKIDAR_USEPOLLING=true
RUN apk add --no-cache git openssh-client bash
COPY . .
RUN <<EOS
set -eu
npx prisma generate
echo "dev image ready" > /tmp/ready
EOS
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN echo 'alias ll="ls -la"' >> /root/.bashrc \
    && git config --global --add safe.directory /app
ONBUILD COPY .env.local /app/.env
EXPOSE 8080 9229
CMD ["npm", "run", "dev", "--", "--inspect=0.0.0.0:9229"]
