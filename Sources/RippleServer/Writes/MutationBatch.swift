#if Sync
import Foundation
import PostgresNIO
import Ripple
import RippleSync

/// Mutations applied by Postgres itself, a batch per round trip — the one place where a client's
/// counter moves and a mutation's result is stored. The node turns each operation into its
/// statements (values bound, never spliced: every statement takes one parameter, a JSON array
/// of the values in their text form, read as `CAST(($1->>n) AS type)`), having run the table's
/// resolver first when it has one, and the function `ripple_sync_apply` runs the batch — for
/// each mutation, in a subtransaction (its savepoint): the counter moved from `id - 1` to `id`
/// first, each operation's locked read and write rule, its write and the rule on the row after,
/// its result stored last; a rejected mutation undone alone, its counter moved again with the
/// rejection stored.
enum MutationBatch {
    /// The function's body as Postgres keeps it (`prosrc`, trimmed): a function with another is
    /// of another version of Ripple.
    static var body: String {
        let parts = function.components(separatedBy: "$fn$")
        return parts.count == 3 ? parts[1].trimmingCharacters(in: .whitespacesAndNewlines) : ""
    }

    /// The function, made (or replaced) by ``MutationWriter/prepare()``. A failure that passes
    /// (a serialization failure, a deadlock, a lost connection or server) is raised again: the
    /// node tries the whole batch again. A mutation the node already refused (`reject`) only moves
    /// the counter and stores the rejection.
    static let function = #"""
        CREATE OR REPLACE FUNCTION ripple_sync_apply(p_client uuid, p_user text, p_batch jsonb) RETURNS jsonb
        LANGUAGE plpgsql AS $fn$
        DECLARE
            m jsonb; op jsonb; answer jsonb := '[]'; id int8; last int8; n int8;
            allowed boolean; state text; cons text; detail text; code text;
            earlier record;
        BEGIN
            FOR m IN SELECT value FROM jsonb_array_elements(p_batch) LOOP
                id := (m->>'id')::int8;
                BEGIN
                    UPDATE ripple_sync_clients SET last_mutation_id = id
                    WHERE client_id = p_client AND user_id = p_user AND last_mutation_id = id - 1;
                    IF NOT FOUND THEN
                        -- Applied or rejected before (its stored result), or out of order.
                        SELECT c.last_mutation_id AS last, r.status, r.code, r.constraint_name, r.message INTO earlier
                        FROM ripple_sync_clients AS c
                        LEFT JOIN ripple_sync_results AS r ON r.client_id = c.client_id AND r.mutation_id = id
                        WHERE c.client_id = p_client AND c.user_id = p_user;
                        IF NOT FOUND THEN
                            answer := answer || jsonb_build_array(jsonb_build_object('id', id, 'status', 'rejected',
                                'code', 'out_of_order', 'message', 'the client id is not this user''s'));
                        ELSIF id > earlier.last THEN
                            answer := answer || jsonb_build_array(jsonb_build_object('id', id, 'status', 'rejected',
                                'code', 'out_of_order', 'message', format('mutation %s came before mutation %s, which the server has not received', id, earlier.last + 1)));
                        ELSE
                            answer := answer || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object('id', id,
                                'status', coalesce(earlier.status, 'applied'), 'code', earlier.code,
                                'constraint', earlier.constraint_name, 'message', earlier.message)));
                        END IF;
                        CONTINUE;
                    END IF;
                    IF m ? 'reject' THEN
                        RAISE EXCEPTION USING ERRCODE = 'RPL01', MESSAGE = m->'reject'->>'code',
                            DETAIL = coalesce(m->'reject'->>'message', ''), CONSTRAINT = coalesce(m->'reject'->>'constraint', '');
                    END IF;
                    FOR op IN SELECT value FROM jsonb_array_elements(m->'ops') LOOP
                        IF op ? 'reject' THEN
                            -- The node rejected the mutation at this operation (its resolver).
                            RAISE EXCEPTION USING ERRCODE = 'RPL01', MESSAGE = op->'reject'->>'code',
                                DETAIL = coalesce(op->'reject'->>'message', ''), CONSTRAINT = coalesce(op->'reject'->>'constraint', '');
                        END IF;
                        allowed := NULL;
                        EXECUTE op->>'read' INTO allowed USING op->'read_args';
                        GET DIAGNOSTICS n = ROW_COUNT;
                        IF n > 0 AND allowed IS NOT TRUE THEN
                            RAISE EXCEPTION USING ERRCODE = 'RPL01', MESSAGE = 'write_rule',
                                DETAIL = 'the rules do not let this user change that row of ' || (op->>'table');
                        END IF;
                        IF n = 0 AND op->>'kind' = 'patch' THEN
                            RAISE EXCEPTION USING ERRCODE = 'RPL01', MESSAGE = 'row_gone',
                                DETAIL = 'the row of ' || (op->>'table') || ' this mutation changes no longer exists';
                        END IF;
                        CONTINUE WHEN n = 0 AND op->>'kind' = 'delete';
                        IF op->>'write' IS NOT NULL THEN
                            EXECUTE op->>'write' USING op->'write_args';
                        END IF;
                        IF op->>'check' IS NOT NULL THEN
                            EXECUTE op->>'check' INTO allowed USING op->'check_args';
                            IF allowed IS NOT TRUE THEN
                                RAISE EXCEPTION USING ERRCODE = 'RPL01', MESSAGE = 'write_rule',
                                    DETAIL = 'the rules do not let this user write that row of ' || (op->>'table');
                            END IF;
                        END IF;
                    END LOOP;
                    INSERT INTO ripple_sync_results (client_id, mutation_id, status) VALUES (p_client, id, 'applied');
                    answer := answer || jsonb_build_array(jsonb_build_object('id', id, 'status', 'applied'));
                EXCEPTION WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, cons = CONSTRAINT_NAME, detail = PG_EXCEPTION_DETAIL;
                    IF state IN ('40001', '40P01') OR left(state, 2) IN ('08', '53') OR left(state, 3) = '57P' THEN
                        RAISE;
                    END IF;
                    -- The subtransaction is undone, the counter with it: moved again, with the rejection.
                    IF state = 'RPL01' THEN
                        GET STACKED DIAGNOSTICS code = MESSAGE_TEXT;
                        detail := nullif(detail, '');
                    ELSE
                        code := state;
                        detail := NULL;   -- Postgres's DETAIL can show other rows' values: never sent
                    END IF;
                    UPDATE ripple_sync_clients SET last_mutation_id = id
                    WHERE client_id = p_client AND user_id = p_user AND last_mutation_id = id - 1;
                    INSERT INTO ripple_sync_results (client_id, mutation_id, status, code, constraint_name, message)
                    VALUES (p_client, id, 'rejected', code, nullif(cons, ''), detail);
                    answer := answer || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object('id', id, 'status', 'rejected',
                        'code', code, 'constraint', nullif(cons, ''), 'message', detail)));
                END;
            END LOOP;
            RETURN answer;
        END $fn$
        """#

    /// One operation's statements for the function (`read` always; `write` and `check` when
    /// the operation has them), each with its own array of values; or the rejection of the
    /// mutation at this operation (`reject`, its resolver's decision).
    struct PlannedOp: Encodable {
        var kind: String
        var table: String
        var read: String?
        var readArgs: [String?]?
        var write: String?
        var writeArgs: [String?]?
        var check: String?
        var checkArgs: [String?]?
        var reject: Refusal?

        enum CodingKeys: String, CodingKey {
            case kind, table, read, readArgs = "read_args", write, writeArgs = "write_args", check, checkArgs = "check_args", reject
        }

        init(kind: String, table: String, read: String, readArgs: [String?], write: String?, writeArgs: [String?]?,
             check: String?, checkArgs: [String?]?) {
            (self.kind, self.table, self.read, self.readArgs) = (kind, table, read, readArgs)
            (self.write, self.writeArgs, self.check, self.checkArgs) = (write, writeArgs, check, checkArgs)
        }

        /// The mutation rejected at this operation with `rejection`.
        init(refusal rejection: Rejection) {
            (kind, table, reject) = ("reject", "", Refusal(rejection))
        }
    }

    /// A rejection the node decided, for the function to store as the mutation's result: a
    /// Postgres SQLSTATE's without a message (the answer gives Ripple's own for the code, as for
    /// one the function meets), any other with its message.
    struct Refusal: Encodable {
        var code: String
        var constraint: String?
        var message: String?

        init(_ rejection: Rejection) {
            (code, constraint) = (rejection.code, rejection.constraint)
            message = rejection.isPostgres ? nil : rejection.message
        }
    }

    /// One mutation for the function: its operations, or the rejection the node already decided.
    struct PlannedMutation: Encodable {
        var id: Int64
        var ops: [PlannedOp]
        var reject: Refusal?
    }

    /// The results the function answered, each with its message (Ripple's own for a Postgres
    /// SQLSTATE: see ``Rejection``).
    static func results(from json: String) throws -> [MutationResult] {
        var results = try JSONDecoder().decode([MutationResult].self, from: Data(json.utf8))
        for index in results.indices where results[index].status == .rejected && results[index].message == nil {
            let rejection = Rejection(state: results[index].code ?? "", constraint: results[index].constraint)
            results[index].message = rejection.message
        }
        return results
    }
}
#endif
