package caesar.peers;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/** Reads the event file written by bench/peers/events.py: magic
 * "CSRPEER1", int64 row count, int64 column count (8), then rows of int64
 * little-endian (seq, ts, type, attr1..attr5), in arrival order. */
public final class Events {
    private Events() {}

    public static Ev[] load(Path path) throws IOException {
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
            ByteBuffer buf = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size())
                    .order(ByteOrder.LITTLE_ENDIAN);
            byte[] magic = new byte[8];
            buf.get(magic);
            if (!new String(magic, java.nio.charset.StandardCharsets.US_ASCII).equals("CSRPEER1")) {
                throw new IOException(path + ": not a CAESAR peer event file");
            }
            long n = buf.getLong();
            long cols = buf.getLong();
            if (cols != 8) {
                throw new IOException(path + ": expected 8 columns, found " + cols);
            }
            Ev[] out = new Ev[(int) n];
            for (int i = 0; i < n; i++) {
                Ev e = new Ev();
                e.seq = buf.getLong();
                e.ts = buf.getLong();
                e.type = (int) buf.getLong();
                e.attr1 = buf.getLong();
                e.attr2 = buf.getLong();
                e.attr3 = buf.getLong();
                e.attr4 = buf.getLong();
                e.attr5 = buf.getLong();
                out[i] = e;
            }
            return out;
        }
    }
}
