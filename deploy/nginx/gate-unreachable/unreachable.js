// The gate's "open" policy for an unreachable room (open-server.conf): whether a request the
// room could not be asked about goes to the shop unchecked, or gets the busy page.
//
// A spell of unreachability starts with a failed check after SPELL_GAP_MS without any; for
// $waiting_room_fail_open_minutes from that start, requests go through unchecked; after it,
// the busy page until the spell ends. nginx 1.22 keeps no state between requests and njs
// 0.7.9 has no shared dictionary, so the spell lives in a small JSON file written by
// whichever worker sees a failure ({"since": ms, "last": ms}); a write is a new file renamed
// over the old one, so no worker reads half of one. Failures are the only thing seen here (a
// successful check never runs this code, and must stay cheap), hence the gap: a busy shop
// asks the room many times a second, and 30 seconds without a failure means it answered.

import fs from 'fs';

const SPELL_GAP_MS = 30 * 1000;
// "last" is written again at most this often: a failing busy shop must not write a file per
// request.
const LAST_EVERY_MS = 1000;

function read(file) {
    try {
        const kept = JSON.parse(fs.readFileSync(file));
        if (typeof kept.since === 'number' && typeof kept.last === 'number') {
            return kept;
        }
    } catch (e) {
        // No spell yet, or a file nobody can read: a new spell.
    }
    return null;
}

function write(r, file, spell) {
    const partial = `${file}.${process.pid}`;
    try {
        fs.writeFileSync(partial, JSON.stringify(spell));
        fs.renameSync(partial, file);
        return true;
    } catch (e) {
        r.error(`waiting room gate: cannot write ${file}: ${e}; failing closed`);
        return false;
    }
}

function decide(r) {
    const now = Date.now();
    const minutes = Number(r.variables.waiting_room_fail_open_minutes);
    const file = r.variables.waiting_room_fail_open_window;
    let spell = read(file);
    if (spell === null || now - spell.last > SPELL_GAP_MS) {
        spell = { since: now, last: now };
        if (write(r, file, spell)) {
            r.warn(`waiting room gate: the room cannot be asked; requests go to the shop `
                + `unchecked for at most ${minutes} minutes (unchecked.log counts them)`);
        } else {
            // A spell nobody can remember would start again with every request: never
            // let a request through on it.
            spell.since = 0;
        }
    } else if (now - spell.last >= LAST_EVERY_MS) {
        spell.last = now;
        write(r, file, spell);
    }
    if (minutes > 0 && now - spell.since < minutes * 60 * 1000) {
        r.internalRedirect('@waiting_room_unchecked');
        return;
    }
    r.headersOut['Retry-After'] = '5';
    r.headersOut['Cache-Control'] = 'no-store';
    r.headersOut['Content-Type'] = 'text/plain';
    r.return(503, 'The waiting room cannot be reached just now. Please try again in a moment.\n');
}

export default { decide };
