/*
 * ringbuf.c - fixed-size byte ring buffer with a line-oriented reader.
 *
 * Used by the serial console driver to accumulate incoming bytes until a
 * complete line is available.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RB_DEFAULT_CAPACITY 1024
#define RB_MIN(a, b) ((a) < (b) ? (a) : (b))

typedef struct ringbuf {
    unsigned char *data;
    size_t capacity;
    size_t head; /* next write position */
    size_t tail; /* next read position */
    size_t used;
} ringbuf_t;

enum rb_status {
    RB_OK = 0,
    RB_FULL = -1,
    RB_EMPTY = -2,
    RB_NOLINE = -3,
};

/**
 * rb_create - allocate a new ring buffer.
 * @capacity: size in bytes; zero selects RB_DEFAULT_CAPACITY.
 *
 * Returns NULL and sets errno on allocation failure.
 */
ringbuf_t *rb_create(size_t capacity)
{
    ringbuf_t *rb;

    if (capacity == 0)
        capacity = RB_DEFAULT_CAPACITY;

    rb = calloc(1, sizeof(*rb));
    if (rb == NULL)
        return NULL;

    rb->data = malloc(capacity);
    if (rb->data == NULL) {
        free(rb);
        errno = ENOMEM;
        return NULL;
    }
    rb->capacity = capacity;
    return rb;
}

void rb_destroy(ringbuf_t *rb)
{
    if (rb != NULL) {
        free(rb->data);
        free(rb);
    }
}

static inline size_t rb_free_space(const ringbuf_t *rb)
{
    return rb->capacity - rb->used;
}

/* Write up to len bytes; returns the number of bytes actually stored. */
size_t rb_write(ringbuf_t *rb, const void *src, size_t len)
{
    const unsigned char *p = src;
    size_t n = RB_MIN(len, rb_free_space(rb));
    size_t first = RB_MIN(n, rb->capacity - rb->head);

    memcpy(rb->data + rb->head, p, first);
    memcpy(rb->data, p + first, n - first);
    rb->head = (rb->head + n) % rb->capacity;
    rb->used += n;
    return n;
}

size_t rb_read(ringbuf_t *rb, void *dst, size_t len)
{
    unsigned char *p = dst;
    size_t n = RB_MIN(len, rb->used);
    size_t first = RB_MIN(n, rb->capacity - rb->tail);

    memcpy(p, rb->data + rb->tail, first);
    memcpy(p + first, rb->data, n - first);
    rb->tail = (rb->tail + n) % rb->capacity;
    rb->used -= n;
    return n;
}

static int rb_peek(const ringbuf_t *rb, size_t offset)
{
    if (offset >= rb->used)
        return -1;
    return rb->data[(rb->tail + offset) % rb->capacity];
}

/*
 * Copy one '\n'-terminated line into buf (without the newline) and NUL
 * terminate it.  Carriage returns immediately before the newline are
 * dropped so that both "\r\n" and "\n" endings work.
 */
int rb_read_line(ringbuf_t *rb, char *buf, size_t bufsize)
{
    size_t i, len = 0;
    bool found = false;

    if (rb->used == 0)
        return RB_EMPTY;

    for (i = 0; i < rb->used; i++) {
        if (rb_peek(rb, i) == '\n') {
            found = true;
            break;
        }
    }
    if (!found)
        return rb->used == rb->capacity ? RB_FULL : RB_NOLINE;

    len = RB_MIN(i, bufsize - 1);
    rb_read(rb, buf, len);
    buf[len] = '\0';
    if (len > 0 && buf[len - 1] == '\r')
        buf[--len] = '\0';

    /* discard anything that did not fit, plus the newline itself */
    while (i-- >= len && rb->used > 0) {
        unsigned char c;
        rb_read(rb, &c, 1);
        if (c == '\n')
            break;
    }
    return (int)len;
}

const char *rb_strerror(int status)
{
    switch (status) {
    case RB_OK:
        return "ok";
    case RB_FULL:
        return "buffer full without newline";
    case RB_EMPTY:
        return "buffer empty";
    case RB_NOLINE:
        return "no complete line yet";
    default:
        return "unknown error";
    }
}

#ifdef RINGBUF_DEMO
int main(void)
{
    char line[64];
    int rc;
    ringbuf_t *rb = rb_create(128);

    if (!rb) {
        perror("rb_create");
        return EXIT_FAILURE;
    }
    rb_write(rb, "hello\r\nworld\npartial", 20);
    while ((rc = rb_read_line(rb, line, sizeof line)) >= 0)
        printf("line: '%s' (%d bytes)\n", line, rc);
    fprintf(stderr, "stopped: %s, %zu bytes left\n", rb_strerror(rc), rb->used);
    rb_destroy(rb);
    return EXIT_SUCCESS;
}
#endif /* RINGBUF_DEMO */
