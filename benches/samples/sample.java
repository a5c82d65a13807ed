package com.example.scheduling;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.PriorityQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * A single-threaded job scheduler that runs tasks at fixed delays or
 * intervals. Time is supplied externally, which keeps it easy to test.
 *
 * @author platform-team
 * @since 2.3
 */
public final class JobScheduler {

    private static final Logger LOG = Logger.getLogger(JobScheduler.class.getName());
    private static final Duration MIN_INTERVAL = Duration.ofMillis(10);

    /** Lifecycle states of a scheduled job. */
    public enum State {
        PENDING, RUNNING, DONE, FAILED, CANCELLED
    }

    /** A job that has been handed to the scheduler. */
    public static final class Job implements Comparable<Job> {
        private final long id;
        private final String name;
        private final Runnable task;
        private final Duration interval;
        private Instant nextRun;
        private State state = State.PENDING;
        private int failures;

        Job(long id, String name, Runnable task, Instant firstRun, Duration interval) {
            this.id = id;
            this.name = Objects.requireNonNull(name, "name");
            this.task = Objects.requireNonNull(task, "task");
            this.nextRun = firstRun;
            this.interval = interval;
        }

        public long id() { return id; }
        public String name() { return name; }
        public State state() { return state; }
        public boolean isRepeating() { return interval != null; }

        @Override
        public int compareTo(Job other) {
            int byTime = nextRun.compareTo(other.nextRun);
            return byTime != 0 ? byTime : Long.compare(id, other.id);
        }

        @Override
        public String toString() {
            return String.format("Job[%d '%s' %s next=%s]", id, name, state, nextRun);
        }
    }

    private final PriorityQueue<Job> queue = new PriorityQueue<>();
    private final List<Job> finished = new ArrayList<>();
    private final AtomicLong ids = new AtomicLong();
    private final Supplier<Instant> clock;
    private int maxFailures = 3;

    public JobScheduler(Supplier<Instant> clock) {
        this.clock = clock;
    }

    public JobScheduler() {
        this(Instant::now);
    }

    public void setMaxFailures(int maxFailures) {
        if (maxFailures < 1) {
            throw new IllegalArgumentException("maxFailures must be positive, was " + maxFailures);
        }
        this.maxFailures = maxFailures;
    }

    /** Runs {@code task} once after {@code delay}. */
    public Job schedule(String name, Runnable task, Duration delay) {
        Job job = new Job(ids.incrementAndGet(), name, task, clock.get().plus(delay), null);
        queue.add(job);
        return job;
    }

    /** Runs {@code task} repeatedly, the first time after {@code interval}. */
    public Job scheduleAtFixedRate(String name, Runnable task, Duration interval) {
        if (interval.compareTo(MIN_INTERVAL) < 0) {
            throw new IllegalArgumentException("interval too small: " + interval);
        }
        Job job = new Job(ids.incrementAndGet(), name, task, clock.get().plus(interval), interval);
        queue.add(job);
        return job;
    }

    public boolean cancel(long id) {
        for (Job job : queue) {
            if (job.id == id) {
                queue.remove(job);
                job.state = State.CANCELLED;
                finished.add(job);
                return true;
            }
        }
        return false;
    }

    /**
     * Executes every job whose time has come.
     *
     * @return the number of jobs that were run
     */
    public int tick() {
        Instant now = clock.get();
        int ran = 0;
        while (!queue.isEmpty() && !queue.peek().nextRun.isAfter(now)) {
            Job job = queue.poll();
            job.state = State.RUNNING;
            try {
                job.task.run();
                job.failures = 0;
                job.state = job.isRepeating() ? State.PENDING : State.DONE;
            } catch (RuntimeException e) {
                job.failures++;
                LOG.log(Level.WARNING, "job '" + job.name + "' failed", e);
                job.state = job.failures >= maxFailures ? State.FAILED : State.PENDING;
            }
            ran++;
            if (job.state == State.PENDING && job.isRepeating()) {
                job.nextRun = now.plus(job.interval);
                queue.add(job);
            } else if (job.state == State.PENDING) {
                job.nextRun = now.plusSeconds(1L << job.failures); // retry with backoff
                queue.add(job);
            } else {
                finished.add(job);
            }
        }
        return ran;
    }

    public Optional<Instant> nextDeadline() {
        Job head = queue.peek();
        return head == null ? Optional.empty() : Optional.of(head.nextRun);
    }

    public List<Job> finishedJobs() {
        return Collections.unmodifiableList(finished);
    }

    public int pendingCount() {
        return queue.size();
    }
}
