/* driver -- being written */
