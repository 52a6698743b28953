package caesar.peers;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Match recorder: per match the query number and the seq numbers of its
 * positive events in component order, appended to one growable long array
 * (no per-match objects beyond what the engine itself hands over). */
public final class Matches {
    private long[] buf = new long[1 << 16];
    private int len;
    private long count;

    public synchronized void add(int query, long[] seqs, int n) {
        ensure(n + 2);
        buf[len++] = query;
        buf[len++] = n;
        System.arraycopy(seqs, 0, buf, len, n);
        len += n;
        count++;
    }

    /** Start a match of `n` seqs; follow with exactly `n` calls of put(). */
    public void begin(int query, int n) {
        ensure(n + 2);
        buf[len++] = query;
        buf[len++] = n;
        count++;
    }

    public void put(long seq) {
        buf[len++] = seq;
    }

    private void ensure(int extra) {
        if (len + extra > buf.length) {
            long[] next = new long[Math.max(buf.length * 2, len + extra)];
            System.arraycopy(buf, 0, next, 0, len);
            buf = next;
        }
    }

    public synchronized long count() {
        return count;
    }

    /** One line per match: "query seq seq ...". */
    public synchronized void write(Path path) throws IOException {
        try (BufferedWriter w = Files.newBufferedWriter(path)) {
            int i = 0;
            StringBuilder sb = new StringBuilder();
            while (i < len) {
                sb.setLength(0);
                sb.append(buf[i]);
                int n = (int) buf[i + 1];
                for (int j = 0; j < n; j++) {
                    sb.append(' ').append(buf[i + 2 + j]);
                }
                sb.append('\n');
                w.write(sb.toString());
                i += n + 2;
            }
        }
    }
}
