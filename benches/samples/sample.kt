// Notes domain model and an in-memory store. This file lives in the default
// package and relies only on the standard library, so it has no imports.

typealias Timestamp = java.time.LocalDateTime

/**
 * A note written by the user. Notes are immutable; edits create copies.
 *
 * @property id stable identifier
 * @property tags lower-case labels used for filtering
 */
data class Note(
    val id: String = java.util.UUID.randomUUID().toString(),
    val title: String,
    val body: String = "",
    val tags: Set<String> = emptySet(),
    val pinned: Boolean = false,
    val updatedAt: Timestamp = Timestamp.now(),
) {
    val preview: String
        get() = body.lineSequence().firstOrNull()?.take(PREVIEW_LENGTH) ?: ""

    companion object {
        const val PREVIEW_LENGTH = 80
    }
}

sealed class NotesEvent {
    data class Added(val note: Note) : NotesEvent()
    data class Updated(val before: Note, val after: Note) : NotesEvent()
    data class Removed(val id: String) : NotesEvent()
    object Cleared : NotesEvent()
}

enum class SortOrder { RECENT, TITLE, PINNED_FIRST }

/** Holds the current list; a stand-in for a reactive state holder. */
class Snapshot<T>(@Volatile var value: T)

interface NotesStore {
    val notes: List<Note>
    fun add(note: Note)
    fun update(id: String, transform: (Note) -> Note): Boolean
    fun remove(id: String): Boolean
}

class InMemoryNotesStore(
    initial: List<Note> = emptyList(),
    private val listener: ((NotesEvent) -> Unit)? = null,
) : NotesStore {

    private val state = Snapshot(initial)
    override val notes: List<Note> get() = state.value

    val size: Int get() = state.value.size

    override fun add(note: Note) {
        require(note.title.isNotBlank()) { "title must not be blank" }
        state.value = state.value + note
        listener?.invoke(NotesEvent.Added(note))
    }

    override fun update(id: String, transform: (Note) -> Note): Boolean {
        val current = state.value
        val index = current.indexOfFirst { it.id == id }
        if (index < 0) return false
        val before = current[index]
        val after = transform(before).copy(id = before.id, updatedAt = Timestamp.now())
        state.value = current.toMutableList().also { it[index] = after }
        listener?.invoke(NotesEvent.Updated(before, after))
        return true
    }

    override fun remove(id: String): Boolean {
        val filtered = state.value.filterNot { it.id == id }
        if (filtered.size == state.value.size) return false
        state.value = filtered
        listener?.invoke(NotesEvent.Removed(id))
        return true
    }

    fun clear() {
        state.value = emptyList()
        listener?.invoke(NotesEvent.Cleared)
    }

    fun search(query: String, order: SortOrder = SortOrder.RECENT): List<Note> {
        val needle = query.trim().lowercase()
        val matches = state.value.filter { note ->
            needle.isEmpty() ||
                note.title.lowercase().contains(needle) ||
                note.body.lowercase().contains(needle) ||
                needle.removePrefix("#") in note.tags
        }
        return when (order) {
            SortOrder.RECENT -> matches.sortedByDescending { it.updatedAt }
            SortOrder.TITLE -> matches.sortedBy { it.title.lowercase() }
            SortOrder.PINNED_FIRST -> matches.sortedWith(
                compareByDescending<Note> { it.pinned }.thenByDescending { it.updatedAt }
            )
        }
    }
}

// Extension helpers used by the UI layer.
fun Note.togglePin(): Note = copy(pinned = !pinned)

fun Note.withTag(tag: String): Note = copy(tags = tags + tag.lowercase())

fun List<Note>.groupByTag(): Map<String, List<Note>> =
    flatMap { note -> note.tags.map { it to note } }
        .groupBy({ it.first }, { it.second })
        .toSortedMap()

fun describe(event: NotesEvent): String = when (event) {
    is NotesEvent.Added -> "added \"${event.note.title}\""
    is NotesEvent.Updated -> "updated ${event.after.id.take(8)}"
    is NotesEvent.Removed -> "removed ${event.id}"
    NotesEvent.Cleared -> "cleared all notes"
}

fun main() {
    val log = mutableListOf<String>()
    val store = InMemoryNotesStore(listener = { log += describe(it) })
    store.add(Note(title = "Groceries", body = "milk\neggs\nbread", tags = setOf("home")))
    store.add(Note(title = "Release plan", body = """
        1. freeze branch
        2. run the full test suite
    """.trimIndent(), tags = setOf("work")))
    val first = store.search("").last()
    store.update(first.id) { it.togglePin().withTag("Urgent") }
    for ((index, note) in store.search("", SortOrder.PINNED_FIRST).withIndex()) {
        println("${index + 1}. ${note.title} [${note.tags.joinToString()}] ${if (note.pinned) "*" else ""}")
    }
    log.forEach(::println)
}
