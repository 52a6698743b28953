package caesar.peers;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.cep.CEP;
import org.apache.flink.cep.functions.PatternProcessFunction;
import org.apache.flink.cep.nfa.aftermatch.AfterMatchSkipStrategy;
import org.apache.flink.cep.pattern.Pattern;
import org.apache.flink.cep.pattern.conditions.SimpleCondition;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamUtils;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.DiscardingSink;
import org.apache.flink.streaming.api.functions.source.SourceFunction;
import org.apache.flink.streaming.api.operators.ChainingStrategy;
import org.apache.flink.streaming.api.transformations.PhysicalTransformation;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.api.windowing.time.Time;
import org.apache.flink.util.Collector;

/** Flink CEP side of the peer benchmark: the CEP library (Pattern API,
 * `CEP.pattern` on a keyed stream, event time) in a local environment of
 * parallelism 1. The source hands the pre-loaded events to the CEP operator
 * in the same thread: `reinterpretAsKeyedStream` keys the stream without a
 * network shuffle, so the source, the CEP operator and the match collector
 * form one chain and the measured thread is the one that runs the NFA (no
 * serialization between operators; heap state backend; object reuse on).
 * Watermarks follow the events every WATERMARK_EVERY events (each at the
 * next event's ts - 1); the final watermark flushes the operator.
 *
 * Workload lines (from bench/peers/patterns.py, flink_spec):
 *   q INDEX WITHIN KEYATTR|- any|next COMP...   COMP = [!]TYPE:VAR[:ATTR OP CONST]...
 */
public final class FlinkHarness implements Harness.Engine {
    static final int WATERMARK_EVERY = Integer.getInteger("caesar.flink.watermarkEvery", 1000);
    // the job runs in this JVM (MiniCluster): the source and sinks reach the
    // run's events, recorder and timing through these
    static volatile Ev[] events;
    static volatile Matches matches;
    static volatile Harness.Timing timing;

    /** Emits the loaded events with their timestamps, then Long.MAX_VALUE. */
    public static final class ArraySource implements SourceFunction<Ev> {
        @Override
        public void run(SourceContext<Ev> ctx) {
            Ev[] evs = events;
            Harness.Timing t = timing;
            synchronized (ctx.getCheckpointLock()) {
                t.start();
                for (int i = 0; i < evs.length; i++) {
                    ctx.collectWithTimestamp(evs[i], evs[i].ts);
                    if ((i + 1) % WATERMARK_EVERY == 0 && i + 1 < evs.length) {
                        ctx.emitWatermark(new Watermark(evs[i + 1].ts - 1));
                    }
                }
                ctx.emitWatermark(new Watermark(Long.MAX_VALUE));
                t.stop();
            }
        }

        @Override
        public void cancel() {}
    }

    /** Records one match: positive events in component order. */
    public static final class Collect extends PatternProcessFunction<Ev, Object> {
        private final int query;
        private final String[] vars;

        Collect(int query, String[] vars) {
            this.query = query;
            this.vars = vars;
        }

        @Override
        public void processMatch(Map<String, List<Ev>> match, Context ctx, Collector<Object> out) {
            Matches m = matches;
            int n = 0;
            for (String v : vars) {
                n += match.get(v).size();
            }
            synchronized (m) {
                m.begin(query, n);
                for (String v : vars) {
                    for (Ev e : match.get(v)) {
                        m.put(e.seq);
                    }
                }
            }
        }
    }

    /** type = t and every constant condition. */
    public static final class Filter extends SimpleCondition<Ev> {
        private final int type;
        private final int[] attrs;
        private final String[] ops;
        private final long[] consts;

        Filter(int type, int[] attrs, String[] ops, long[] consts) {
            this.type = type;
            this.attrs = attrs;
            this.ops = ops;
            this.consts = consts;
        }

        @Override
        public boolean filter(Ev e) {
            if (e.type != type) {
                return false;
            }
            for (int i = 0; i < attrs.length; i++) {
                long v = e.attr(attrs[i]);
                long c = consts[i];
                boolean ok;
                switch (ops[i]) {
                    case "=": ok = v == c; break;
                    case "!=": ok = v != c; break;
                    case "<": ok = v < c; break;
                    case "<=": ok = v <= c; break;
                    case ">": ok = v > c; break;
                    case ">=": ok = v >= c; break;
                    default: throw new IllegalArgumentException(ops[i]);
                }
                if (!ok) {
                    return false;
                }
            }
            return true;
        }
    }

    public static final class KeyBy implements KeySelector<Ev, Long> {
        private final int attr;

        KeyBy(int attr) {
            this.attr = attr;
        }

        @Override
        public Long getKey(Ev e) {
            return attr == 0 ? 0L : e.attr(attr);
        }
    }

    private static final java.util.regex.Pattern COND =
            java.util.regex.Pattern.compile("attr(\\d)(!=|<=|>=|=|<|>)(-?\\d+)");

    static Filter filter(String[] tok) {
        int n = tok.length - 2;
        int[] attrs = new int[n];
        String[] ops = new String[n];
        long[] consts = new long[n];
        for (int i = 0; i < n; i++) {
            java.util.regex.Matcher m = COND.matcher(tok[i + 2]);
            if (!m.matches()) {
                throw new IllegalArgumentException("bad condition " + tok[i + 2]);
            }
            attrs[i] = Integer.parseInt(m.group(1));
            ops[i] = m.group(2);
            consts[i] = Long.parseLong(m.group(3));
        }
        return new Filter(Integer.parseInt(tok[0]), attrs, ops, consts);
    }

    static void addQuery(String line, DataStream<Ev> source) {
        String[] f = line.trim().split("\\s+");
        int query = Integer.parseInt(f[1]);
        long within = Long.parseLong(f[2]);
        int key = f[3].equals("-") ? 0 : Integer.parseInt(f[3].substring(4));
        boolean any = f[4].equals("any");
        Pattern<Ev, Ev> p = null;
        List<String> vars = new ArrayList<>();
        for (int i = 5; i < f.length; i++) {
            boolean negated = f[i].startsWith("!");
            String[] tok = (negated ? f[i].substring(1) : f[i]).split(":");
            String var = tok[1];
            Filter cond = filter(tok);
            if (p == null) {
                if (negated) {
                    throw new IllegalArgumentException("Flink CEP has no negation at the start of a pattern");
                }
                p = Pattern.<Ev>begin(var, AfterMatchSkipStrategy.noSkip()).where(cond);
            } else if (negated) {
                p = p.notFollowedBy(var).where(cond);
            } else {
                p = (any ? p.followedByAny(var) : p.followedBy(var)).where(cond);
            }
            if (!negated) {
                vars.add(var);
            }
        }
        p = p.within(Time.milliseconds(within));
        KeyedStream<Ev, Long> keyed = DataStreamUtils.reinterpretAsKeyedStream(
                source, new KeyBy(key), Types.LONG);
        SingleOutputStreamOperator<Object> matches = CEP.pattern(keyed, p).inEventTime()
                .process(new Collect(query, vars.toArray(new String[0])));
        // the CEP operator starts a new chain by default (HEAD): chained to
        // the source instead, records reach the NFA in the same thread,
        // without a serializing local channel in between
        ((PhysicalTransformation<?>) matches.getTransformation())
                .setChainingStrategy(ChainingStrategy.ALWAYS);
        matches.addSink(new DiscardingSink<>());
    }

    @Override
    public void run(String spec, Ev[] evs, Matches m, Harness.Timing t) throws Exception {
        long setup0 = System.nanoTime();
        events = evs;
        matches = m;
        timing = t;
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1, new Configuration());
        env.getConfig().enableObjectReuse();
        DataStream<Ev> source = env.addSource(new ArraySource(), "events").returns(Ev.class);
        for (String line : spec.split("\n")) {
            if (line.startsWith("q ")) {
                addQuery(line, source);
            }
        }
        if (Boolean.getBoolean("caesar.flink.debug")) {
            for (org.apache.flink.runtime.jobgraph.JobVertex v : env.getStreamGraph(false).getJobGraph().getVertices()) {
                System.err.println("vertex: " + v.getName());
            }
        }
        env.execute("caesar-peers");
        t.setupNs = System.nanoTime() - setup0 - t.wallNs;
        events = null;
    }

    public static void main(String[] args) throws Exception {
        Harness.serve(new FlinkHarness());
    }
}
