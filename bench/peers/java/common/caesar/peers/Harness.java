package caesar.peers;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/** The command loop both peer harnesses share. The Python driver
 * (bench/peers/peers.py) keeps one JVM per engine alive for a whole
 * benchmark so that JIT-compiled code stays warm across repetitions, and
 * sends one command per line on stdin:
 *
 *   load EVENTS-FILE
 *   run WORKLOAD-FILE [MATCHES-OUT]
 *   quit
 *
 * `run` answers with one line
 *   RESULT wall_ns=... thread_cpu_ns=... process_cpu_ns=... matches=... setup_ns=...
 * (wall and CPU times cover feeding every event and flushing the engine at
 * the end of the stream; setup = compile/deploy, excluded), or
 *   ERROR message
 * Everything else the engines print goes to stderr. */
public final class Harness {
    public interface Engine {
        /** Runs the workload over `events` once, recording matches; fills `t`. */
        void run(String workload, Ev[] events, Matches matches, Timing t) throws Exception;
    }

    /** What one run measured. */
    public static final class Timing {
        public long wallNs, threadCpuNs, processCpuNs, setupNs;
        private long w0, t0, p0;

        /** Call on the event thread right before the first event. */
        public void start() {
            p0 = processCpu();
            t0 = THREADS.getCurrentThreadCpuTime();
            w0 = System.nanoTime();
        }

        /** Call on the same thread right after the engine is flushed. */
        public void stop() {
            wallNs = System.nanoTime() - w0;
            threadCpuNs = THREADS.getCurrentThreadCpuTime() - t0;
            processCpuNs = processCpu() - p0;
        }
    }

    static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    static long processCpu() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
        }
        return -1;
    }

    private Harness() {}

    public static void serve(Engine engine) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Ev[] events = null;
        System.out.println("READY");
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.trim().split(" ");
            try {
                switch (parts[0]) {
                    case "load":
                        events = Events.load(Path.of(parts[1]));
                        System.out.println("OK " + events.length);
                        break;
                    case "run":
                        if (events == null) {
                            throw new IllegalStateException("run before load");
                        }
                        String workload = Files.readString(Path.of(parts[1]));
                        Matches matches = new Matches();
                        Timing t = new Timing();
                        engine.run(workload, events, matches, t);
                        if (parts.length > 2) {
                            matches.write(Path.of(parts[2]));
                        }
                        System.out.println("RESULT wall_ns=" + t.wallNs + " thread_cpu_ns=" + t.threadCpuNs
                                + " process_cpu_ns=" + t.processCpuNs + " matches=" + matches.count()
                                + " setup_ns=" + t.setupNs);
                        break;
                    case "quit":
                        System.out.println("BYE");
                        System.out.flush();
                        return;
                    default:
                        throw new IllegalArgumentException("unknown command " + parts[0]);
                }
            } catch (Throwable e) {
                e.printStackTrace();
                String msg = String.valueOf(e.getMessage()).replace('\n', ' ');
                System.out.println("ERROR " + e.getClass().getSimpleName() + ": " + msg);
            }
            System.out.flush();
        }
    }
}
